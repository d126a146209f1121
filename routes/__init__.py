"""The HTTP routes behind the edge: `/graphql` (Strawberry's view, `graphql`), the feeds (`feeds`, rendered by
`feed_xml`) and the `/chat` event stream (`chat_stream`)."""
