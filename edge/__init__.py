"""The HTTP edge in front of GraphQL, in the order a request passes it.

One ASGI layer (front.py): request id, CORS, body limit, identity (API key, bearer), the rate-limit budget; then
for `/graphql` the steps, one module each: request parsing -> persisted documents -> whole-response cache ->
GraphQL (whose guard prices the query and charges the budget).
"""
