"""The search index an export writes into the bundle, per access group."""
