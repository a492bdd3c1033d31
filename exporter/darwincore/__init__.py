"""Darwin Core: reading a checklist into species records (`fednode import dwc`), and
writing the node's public species as a Darwin Core Archive."""
