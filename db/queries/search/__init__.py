"""Search: papers (keyword, semantic, hybrid) with facets and highlights, similar papers, names and autocomplete.

Relevance (keyword): ts_rank_cd(search_vector, query) * (1 + ln(1 + cited_by_count)): text rank, with title
(weight A) over abstract (B) over author names (C), boosted by the log of the citation count.
Semantic: the nearest papers by cosine similarity of all-MiniLM-L6-v2 vectors (HNSW index, pgvector).
Hybrid: reciprocal rank fusion, sum over both rankings of 1 / (60 + rank), of the keyword and semantic lists.

- `statement`: the one statement that answers a page of papers (matches, page, total and facets).
- `papers`: `search_papers` and what it returns.
- `estimate`: how many papers match past the cap.
- `similar`: the nearest papers of a paper.
- `names`: researchers and institutions listed by name.
- `suggest`: autocomplete over researchers, institutions and papers.
"""
