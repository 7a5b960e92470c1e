"""Prerequisites (Java, Maven, disk space) and the fetch of Cassandra's jars from Maven Central.

Maven Central does not carry the 5.0 binary tarball (`apache-cassandra:tar.gz:bin` stops at 4.0-alpha2),
but it does carry `org.apache.cassandra:cassandra-all` and every jar it runs on.  So a node here is
assembled from Maven: `mvn -C dependency:copy-dependencies` fetches the jars (Maven checks each jar against
Central's checksum; `-C` makes a mismatch fatal), then every jar is checked against the SHA-256 list pinned
beside this module.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from api.config import NodeSettings
from api.node.common import NodeError, PrerequisiteError, say

CASSANDRA_VERSION = "5.0.9"
PINNED_CHECKSUMS = Path(__file__).with_name(f"cassandra-{CASSANDRA_VERSION}-jars.sha256")

# Free space the fetch needs (jars ~70 MB, Maven's copy in ~/.m2 as much again) and a node needs to start.
FETCH_MIN_FREE_BYTES = 400 * 1024 * 1024
START_MIN_FREE_BYTES = 300 * 1024 * 1024


# --------------------------------------------------------------------------------------------- tools


def _require_tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if not path:
        raise PrerequisiteError(f"'{name}' was not found on PATH. {hint}")
    return path


def java_major_version(java: str) -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise PrerequisiteError(f"could not read the Java version from `{java} -version`: {out.strip()[:200]}")
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def require_java() -> str:
    java = _require_tool(
        "java",
        "Cassandra 5.0 needs a Java 11 or 17 runtime: install one (Debian: apt-get install openjdk-17-jre-headless)"
        " or put its bin/ on PATH.",
    )
    major = java_major_version(java)
    if major not in (11, 17):
        raise PrerequisiteError(f"Cassandra 5.0 runs on Java 11 or 17, but `java` on PATH is Java {major}.")
    return java


def require_free_space(path: Path, needed: int, what: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(path).free
    if free < needed:
        raise PrerequisiteError(
            f"not enough disk space to {what}: {free // 2**20} MiB free under {path}, "
            f"{needed // 2**20} MiB needed. Free some space (or point CHRONICLE_CACHE_DIR / "
            "CHRONICLE_STATE_DIR elsewhere) and try again."
        )


# --------------------------------------------------------------------------------------------- fetch


def distribution_dir(version: str = CASSANDRA_VERSION, settings: NodeSettings | None = None) -> Path:
    return (settings or NodeSettings.from_env()).cache_dir / f"cassandra-{version}"


def _read_pinned_checksums() -> dict[str, str]:
    pinned = {}
    for line in PINNED_CHECKSUMS.read_text().splitlines():
        if line.strip():
            digest, name = line.split()
            pinned[name] = digest
    return pinned


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_jars(lib: Path) -> None:
    """Every pinned jar present with its pinned SHA-256, and nothing unexpected besides."""
    pinned = _read_pinned_checksums()
    present = {p.name for p in lib.glob("*.jar")}
    missing = sorted(set(pinned) - present)
    extra = sorted(present - set(pinned))
    if missing or extra:
        raise PrerequisiteError(
            f"the fetched jar set differs from the pinned list: missing {missing}, unexpected {extra}")
    for name, digest in pinned.items():
        actual = _sha256(lib / name)
        if actual != digest:
            raise PrerequisiteError(f"checksum mismatch for {name}: expected {digest}, got {actual}")


_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>chronicle</groupId><artifactId>cassandra-node</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId><version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def fetch(version: str = CASSANDRA_VERSION, *, settings: NodeSettings | None = None, log=say) -> Path:
    """Fetch Cassandra's jars with Maven into the cache (once) and verify them; returns the lib folder."""
    settings = settings or NodeSettings.from_env()
    dist = distribution_dir(version, settings)
    lib = dist / "lib"
    if (dist / ".verified").exists():
        return lib
    if version != CASSANDRA_VERSION:
        raise NodeError(f"only Cassandra {CASSANDRA_VERSION} has pinned checksums; {version} cannot be verified")
    mvn = _require_tool(
        "mvn", "Maven fetches Cassandra from Maven Central: install it (Debian: apt-get install maven)."
    )
    require_java()
    require_free_space(settings.cache_dir, FETCH_MIN_FREE_BYTES, "fetch Cassandra")
    log(f"fetching Apache Cassandra {version} from Maven Central into {dist} ...")
    with tempfile.TemporaryDirectory(dir=settings.cache_dir, prefix=".fetch-") as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "pom.xml").write_text(_POM.format(version=version))
        # CHRONICLE_MAVEN_SETTINGS: a settings.xml for mirrors, proxies or another local repository.
        settings_args = ["-s", settings.maven_settings] if settings.maven_settings else []
        proc = subprocess.run(
            [mvn, "-B", "-q", "-C", *settings_args, "dependency:copy-dependencies",
             f"-DoutputDirectory={tmp_path / 'lib'}", "-DincludeScope=runtime"],
            cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise PrerequisiteError(
                f"Maven could not download Cassandra {version} (exit {proc.returncode}). Check that Maven "
                f"Central is reachable (proxy settings in ~/.m2/settings.xml) and that the disk is not full.\n{tail}"
            )
        verify_jars(tmp_path / "lib")
        if dist.exists():
            shutil.rmtree(dist)
        dist.mkdir(parents=True)
        (tmp_path / "lib").rename(lib)
    (dist / ".verified").write_text(f"{version}\n")
    log(f"Cassandra {version}: {len(list(lib.glob('*.jar')))} jars verified against {PINNED_CHECKSUMS.name}")
    return lib
