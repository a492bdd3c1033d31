"""The document library: PDFs read, cut into passages, indexed and encoded at export."""
