-- wrk script for the Q4 benchmark: cycles through the request paths in $PATHS_FILE (one per line).
local paths = {}
for line in io.lines(os.getenv("PATHS_FILE")) do paths[#paths + 1] = line end
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i % #paths) + 1])
end
