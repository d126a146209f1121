"""The HTTP edge in front of GraphQL: one ASGI step per module, in the order a request passes them.

CORS -> body limit -> identity (API key, bearer) -> rate-limit headers -> request parsing -> persisted
documents -> whole-response cache -> GraphQL (whose guard prices the query and charges the budget).
"""
