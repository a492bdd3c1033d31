"""Content and the project: the node's folder and node.toml, reading and validating
content files against the collections' JSON Schemas, and scaffolding new records."""
