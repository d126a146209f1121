// Compile-time proof (tsc --noEmit) that the generated types fit a real client and the fields the
// site reads: each function is what a page's data loader does with its operation.
import { ClientError, GraphQLClient } from "graphql-request";
import {
  AutocompleteDocument,
  FollowResearcherDocument,
  InstitutionPageDocument,
  InstitutionsListDocument,
  LatestPapersDocument,
  PaperListDocument,
  PaperPageDocument,
  ResearcherNetworkDocument,
  ResearcherPageDocument,
  ResearchersListDocument,
  ResolvePathDocument,
  SearchDocument,
  SitemapPageDocument,
  UnfollowResearcherDocument,
  ViewerFeedDocument,
  type ResearcherPageQuery,
} from "./generated/graphql";
import type { ErrorCode } from "./generated/schema-enums";

export function client(endpoint: string): GraphQLClient {
  return new GraphQLClient(endpoint);
}

export async function researcherPage(c: GraphQLClient, id: string, page = 1): Promise<ResearcherPageQuery> {
  return c.request(ResearcherPageDocument, { id, page });
}

export function researcherMeta(data: ResearcherPageQuery): string | null {
  const r = data.researcher;
  if (!r) return null;
  // Nested connections are null (with an error) when an argument was malformed; the rest of the page renders.
  const papers: number = r.papers?.totalCount ?? r.paperCount;
  const first = r.papers?.nodes[0];
  const firstAuthor: string | undefined = first?.authors[0]?.researcher?.slug;
  return `${r.name}: ${papers} papers in this archive (${firstAuthor ?? "-"})`;
}

export async function paperPage(c: GraphQLClient, id: string): Promise<string | null> {
  const { paper } = await c.request(PaperPageDocument, { id });
  return paper ? `${paper.title} (${paper.authors.map((a) => a.name).join(", ")})` : null;
}

export async function institutionPage(c: GraphQLClient, id: string): Promise<number | null> {
  const { institution } = await c.request(InstitutionPageDocument, { id });
  return institution ? (institution.papers?.totalPages ?? null) : null;
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

// Next.js generateSitemaps(): chunk 0 says how many chunks there are; each chunk is one sitemap file.
export async function sitemapChunks(c: GraphQLClient): Promise<number[]> {
  const { sitemap } = await c.request(SitemapPageDocument, { kind: "PAPER", chunk: 0 });
  return [...Array(sitemap.chunkCount).keys()];
}

export async function sitemap(c: GraphQLClient, chunk: number): Promise<string[]> {
  const { sitemap } = await c.request(SitemapPageDocument, { kind: "PAPER", chunk });
  return sitemap.entries.map((e) => `${e.path} ${e.modifiedAt}`);
}

export async function resolvePath(c: GraphQLClient, path: string): Promise<string> {
  const { resolvePath } = await c.request(ResolvePathDocument, { path });
  if (!resolvePath) return "404";
  return resolvePath.redirect ? `redirect ${resolvePath.path} (${resolvePath.matchedBy})` : resolvePath.node.__typename;
}

export async function search(c: GraphQLClient, query: string, page = 1): Promise<string[]> {
  const { search } = await c.request(SearchDocument, { query, page });
  const years = search.facets?.years.values.map((v) => `${v.value}: ${v.count}`) ?? [];
  return [...search.edges.map((e) => e.highlights.title ?? e.node.title), ...years];
}

export async function autocomplete(c: GraphQLClient, query: string): Promise<string[]> {
  const { autocomplete } = await c.request(AutocompleteDocument, { query, types: ["RESEARCHER", "PAPER"] });
  return autocomplete.map((s) => `${s.type} ${s.label} ${s.slug}`);
}

export async function network(c: GraphQLClient, id: string): Promise<number> {
  const { researcher } = await c.request(ResearcherNetworkDocument, { id, depth: 2 });
  return researcher?.network?.edges.length ?? 0;
}

// The code of a failed request's first error: the schema's ErrorCode enum lists every one the API answers.
export function errorCode(error: unknown): ErrorCode | null {
  if (!(error instanceof ClientError)) return null;
  const code = error.response.errors?.[0]?.extensions?.code;
  return typeof code === "string" ? (code as ErrorCode) : null;
}

// What the site does about each code; the switch is exhaustive, so a code added to the schema fails this build
// until the site decides what to do about it.
export function onError(code: ErrorCode): "fix-request" | "retry-later" | "not-found" | "sign-in" | "report" {
  switch (code) {
    case "BAD_USER_INPUT":
    case "BAD_REQUEST":
    case "UNSUPPORTED_MEDIA_TYPE":
    case "METHOD_NOT_ALLOWED":
    case "GRAPHQL_PARSE_FAILED":
    case "TOO_MANY_TOKENS":
    case "GRAPHQL_VALIDATION_FAILED":
    case "QUERY_TOO_DEEP":
    case "TOO_MANY_ALIASES":
    case "TOO_MANY_DIRECTIVES":
    case "TOO_MANY_FIELDS":
    case "TOO_MANY_FRAGMENTS":
    case "QUERY_TOO_COMPLEX":
    case "PAYLOAD_TOO_LARGE":
    case "REQUEST_HEAD_TOO_LARGE":
    case "PERSISTED_QUERY_NOT_FOUND":
    case "PERSISTED_QUERY_REQUIRED":
    case "PERSISTED_QUERY_NOT_SUPPORTED":
    case "PERSISTED_QUERY_HASH_MISMATCH":
    case "IDEMPOTENCY_KEY_REUSED":
    case "FORBIDDEN_ORIGIN":
      return "fix-request";
    case "NOT_FOUND":
      return "not-found";
    case "UNAUTHENTICATED":
      return "sign-in";
    case "AUTH_UNAVAILABLE":
    case "RATE_LIMITED":
    case "LIMIT_EXCEEDED":
    case "TIMEOUT":
    case "REQUEST_TIMEOUT":
    case "OVERLOADED":
    case "SERVICE_UNAVAILABLE":
    case "SEMANTIC_UNAVAILABLE":
    case "CHAT_UNAVAILABLE":
    case "MODEL_UNAVAILABLE":
    case "IDEMPOTENCY_KEY_IN_USE":
      return "retry-later";
    case "INTERNAL_SERVER_ERROR":
      return "report";
    default: {
      const unhandled: never = code;
      return unhandled;
    }
  }
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
