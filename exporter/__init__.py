"""fednode exporter: content in, static files and the sidecar bundle out."""

__version__ = "0.1.0"
