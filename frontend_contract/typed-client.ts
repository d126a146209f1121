// Compile-time proof (tsc --noEmit) that the generated types fit a real client and the fields the
// site reads: each function is what a page's data loader does with its operation.
import { GraphQLClient } from "graphql-request";
import {
  FollowResearcherDocument,
  InstitutionPageDocument,
  InstitutionsListDocument,
  LatestPapersDocument,
  PaperListDocument,
  PaperPageDocument,
  ResearcherPageDocument,
  ResearchersListDocument,
  ResolvePathDocument,
  SitemapPageDocument,
  UnfollowResearcherDocument,
  ViewerFeedDocument,
  type ResearcherPageQuery,
} from "./generated/graphql";

export function client(endpoint: string): GraphQLClient {
  return new GraphQLClient(endpoint);
}

export async function researcherPage(c: GraphQLClient, id: string, page = 1): Promise<ResearcherPageQuery> {
  return c.request(ResearcherPageDocument, { id, page });
}

export function researcherMeta(data: ResearcherPageQuery): string | null {
  const r = data.researcher;
  if (!r) return null;
  const papers: number = r.papers.totalCount;
  const first = r.papers.nodes[0];
  const firstAuthor: string | undefined = first?.authors[0]?.researcher?.slug;
  return `${r.name}: ${papers} papers in this archive (${firstAuthor ?? "-"})`;
}

export async function paperPage(c: GraphQLClient, id: string): Promise<string | null> {
  const { paper } = await c.request(PaperPageDocument, { id });
  return paper ? `${paper.title} (${paper.authors.map((a) => a.name).join(", ")})` : null;
}

export async function institutionPage(c: GraphQLClient, id: string): Promise<number | null> {
  const { institution } = await c.request(InstitutionPageDocument, { id });
  return institution ? institution.papers.totalPages : null;
}

export async function paperList(c: GraphQLClient, category: string): Promise<string[]> {
  const { papers } = await c.request(PaperListDocument, { filter: { category }, sort: "MOST_CITED" });
  return papers.nodes.map((p) => p.slug);
}

export async function researchersList(c: GraphQLClient, query: string | null): Promise<string[]> {
  const { researchers } = await c.request(ResearchersListDocument, { query });
  return researchers.nodes.map((r) => r.slug);
}

export async function institutionsList(c: GraphQLClient, country: string): Promise<string[]> {
  const { institutions } = await c.request(InstitutionsListDocument, { country, sort: "NAME" });
  return institutions.nodes.map((i) => `${i.name} (${i.rorId})`);
}

export async function latestPapers(c: GraphQLClient): Promise<string[]> {
  const { papers } = await c.request(LatestPapersDocument, { first: 50 });
  return papers.nodes.map((p) => p.absUrl);
}

export async function sitemap(c: GraphQLClient, after: string | null): Promise<[string[], string | null]> {
  const { sitemap } = await c.request(SitemapPageDocument, { kind: "PAPER", after });
  return [sitemap.entries.map((e) => e.slug), sitemap.hasNextPage ? (sitemap.endCursor ?? null) : null];
}

export async function resolvePath(c: GraphQLClient, path: string): Promise<string> {
  const { resolvePath } = await c.request(ResolvePathDocument, { path });
  return resolvePath.redirect ? `redirect ${resolvePath.path}` : resolvePath.node.__typename;
}

// Signed in: the site's server sends the reader's token (`Authorization: Bearer <JWT>`) with these.
export async function viewerFeed(c: GraphQLClient, after: string | null): Promise<string[] | null> {
  const { viewer } = await c.request(ViewerFeedDocument, { first: 24, after });
  return viewer ? viewer.feed.nodes.map((p) => `${p.title} (${p.published})`) : null;
}

export async function toggleFollow(c: GraphQLClient, id: string, follow: boolean): Promise<number> {
  if (follow) {
    const { followResearcher } = await c.request(FollowResearcherDocument, { id });
    return followResearcher.researcher.followerCount;
  }
  const { unfollowResearcher } = await c.request(UnfollowResearcherDocument, { id });
  const stillFollowing: boolean | null | undefined = unfollowResearcher.researcher.viewerIsFollowing;
  return stillFollowing ? -1 : unfollowResearcher.researcher.followerCount;
}
