"""The HTTP edge in front of GraphQL: one ASGI step per module, in the order a request passes them.

body limit -> identity -> rate limit -> persisted documents -> whole-response cache -> GraphQL.
"""
