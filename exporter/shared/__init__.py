"""What the export and the sidecar both use, with no pipeline behind it: errors,
file versions, inotify, the search engine's format and word vectors, and the library's
sentence encoder."""
