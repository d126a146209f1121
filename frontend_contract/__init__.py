"""The site's GraphQL contract: the exported SDL and the operations the site sends."""
