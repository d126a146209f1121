"""What every layer of a request knows of it, below the edge and GraphQL alike: who asks (`identity`), its charge of
rate-limit points (`rate`), the GraphQL request (`graphql_request`), what it spent (`stats`) and the one typed
state the edge makes for it (`state`). Standard library only."""
