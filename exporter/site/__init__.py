"""The public outputs: each record as served, the pages for people, the CDN's routing
rules, the OpenAPI document, whole-collection downloads, and the CDN's folder limit."""
