"""The PySpark data pipeline: bulk scheduling from files and delivery analytics (see pipeline/README.md)."""
