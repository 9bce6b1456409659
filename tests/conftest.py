"""Root test configuration: the real-server fixtures (PostgreSQL, S3, GCS, TensorFlow)."""

pytest_plugins = ["tests.servers.plugin", "tests.file_times"]
