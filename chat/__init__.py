"""Chat with the papers: retrieval from the archive, the prompt, the model's streamed answer, its citations,
the stored conversation and each reader's quota. No GraphQL and no HTTP here: `resolvers/chat.py` serves it
as the `askPapers` mutation and as the `/chat` event stream.
"""
