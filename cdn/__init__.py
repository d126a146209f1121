"""The CDN in front of the API: the client that tells it which tags a write made stale (`purge`)."""
