# The registry service image. Storage credentials reach fsspec through the usual variables.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY client ./client
COPY service ./service
COPY migrations ./migrations
RUN pip install --no-cache-dir ".[server,s3,gcs]"
USER nobody
EXPOSE 8080
# Migrations are a deploy step: run `recordkeeper db upgrade` (the compose file does) before serving.
CMD ["recordkeeper", "serve", "--host", "0.0.0.0", "--port", "8080"]
