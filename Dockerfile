# Chronicle's API / worker image, used by docker-compose.yml (Cassandra comes from the official image there).
FROM python:3.11-slim
WORKDIR /app
# PYTHONPATH: `chronicle` (and gunicorn) use /app/api, whose migrations find /app/cql beside it.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/app
COPY pyproject.toml README.md ./
COPY api ./api
RUN pip install --no-cache-dir .
COPY cql ./cql
COPY runtime_scripts ./runtime_scripts
COPY cleaning_scripts ./cleaning_scripts
COPY gunicorn.conf.py ./
EXPOSE 8080
CMD ["gunicorn", "-c", "gunicorn.conf.py", "api.wsgi:app"]
