// Runs every operation the site sends, through a real GraphQL client, against a running API.
//
//   WOVEPAPER_API_URL=http://127.0.0.1:8000/graphql node --test test/
//
// It starts nothing: the server and its data are the caller's (tests/contract/test_node_contract.py
// starts one on the demo database). Ids come from the list operations, as the site's links do.
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { ClientError, GraphQLClient } from "graphql-request";

const API = process.env.WOVEPAPER_API_URL;
const operation = (name) => readFileSync(new URL(`../operations/${name}.graphql`, import.meta.url), "utf8");

const isInt = (v) => Number.isInteger(v);
const isString = (v) => typeof v === "string";
const isDate = (v) => isString(v) && !Number.isNaN(Date.parse(v));
const nullOr = (check) => (v) => v === null || check(v);
const listOf = (check) => (v) => Array.isArray(v) && v.every(check);

function assertShape(value, shape, where) {
  assert.equal(typeof value, "object", `${where} is an object`);
  assert.notEqual(value, null, `${where} is not null`);
  for (const [key, check] of Object.entries(shape)) {
    assert.ok(key in value, `${where}.${key} is present`);
    if (typeof check === "function") {
      assert.ok(check(value[key]), `${where}.${key} has the right type: ${JSON.stringify(value[key])}`);
    } else {
      assertShape(value[key], check, `${where}.${key}`);
    }
  }
}

const researcherLink = { id: isString, databaseId: isInt, slug: isString, name: isString };
const institutionLink = { id: isString, databaseId: isInt, slug: isString, name: isString };
const paperItem = {
  id: isString,
  databaseId: isInt,
  arxivId: isString,
  slug: isString,
  title: isString,
  abstract: isString,
  authorsText: isString,
  categories: listOf(isString),
  primaryCategory: isString,
  published: isDate,
  absUrl: isString,
  pdfUrl: isString,
  citedByCount: nullOr(isInt),
  analysed: (v) => typeof v === "boolean",
};
const analysis = {
  summary: nullOr(isString),
  topics: nullOr(listOf(isString)),
  paperType: nullOr(isString),
  researchField: nullOr(isString),
  novelty: nullOr(isString),
  significanceScore: nullOr((v) => typeof v === "number"),
};
const pageFields = { totalCount: isInt, totalPages: isInt, pageInfo: { page: nullOr(isInt), hasNextPage: (v) => typeof v === "boolean" } };

function assertAuthors(authors, where, { institutions }) {
  assert.ok(Array.isArray(authors), `${where} is a list`);
  authors.forEach((a, i) => {
    assert.equal(a.position, i + 1, `${where}[${i}] is in position order`);
    assert.ok(isString(a.name));
    if (a.researcher !== null) assertShape(a.researcher, researcherLink, `${where}[${i}].researcher`);
    if (institutions) {
      assert.ok(Array.isArray(a.institutions));
      a.institutions.forEach((inst, j) => assertShape(inst, institutionLink, `${where}[${i}].institutions[${j}]`));
    }
  });
}

function assertPaging(connection, first, where) {
  assertShape(connection, pageFields, where);
  assert.equal(connection.totalPages, Math.ceil(connection.totalCount / first), `${where}.totalPages`);
  assert.ok(connection.nodes.length <= first, `${where} holds at most ${first} items`);
  if (connection.totalCount > 0 && connection.pageInfo.page === 1) {
    assert.equal(connection.nodes.length, Math.min(first, connection.totalCount), `${where}: a full first page`);
  }
}

function assertNewestFirst(nodes, where) {
  for (let i = 1; i < nodes.length; i++) {
    assert.ok(Date.parse(nodes[i - 1].published) >= Date.parse(nodes[i].published), `${where} is newest first`);
  }
}

async function errorCode(promise) {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ClientError, `a GraphQL error response, got ${error}`);
    return error.response.errors?.[0]?.extensions?.code;
  }
  assert.fail("expected a GraphQL error");
}

describe("frontend contract", { skip: API ? false : "WOVEPAPER_API_URL is not set" }, () => {
  const client = new GraphQLClient(API ?? "http://unused", { headers: { accept: "application/json" } });
  const request = (name, variables) => client.request(operation(name), variables);
  const seen = {};

  test("LatestPapers: newest papers for the home page and RSS", async () => {
    const data = await request("LatestPapers", { first: 10 });
    const nodes = data.papers.nodes;
    assert.ok(nodes.length > 0 && nodes.length <= 10);
    const latest = { id: isString, arxivId: isString, slug: isString, title: isString, abstract: isString, authorsText: isString, categories: listOf(isString), primaryCategory: isString, published: isDate, updated: isDate, absUrl: isString };
    nodes.forEach((p, i) => assertShape(p, latest, `papers.nodes[${i}]`));
    assertNewestFirst(nodes, "LatestPapers");
    seen.paper = nodes[0];
  });

  test("PaperPage: the paper by arXiv id and by slug, authors in order", async () => {
    const { arxivId, slug } = seen.paper;
    const byId = await request("PaperPage", { id: arxivId });
    assertShape(byId.paper, { ...paperItem, ...analysis, version: isInt, updated: isDate, doi: nullOr(isString) }, "paper");
    assert.equal(byId.paper.arxivId, arxivId);
    assertAuthors(byId.paper.authors, "paper.authors", { institutions: true });
    const bySlug = await request("PaperPage", { id: slug });
    assert.deepEqual(bySlug, byId);
    assert.equal((await request("PaperPage", { id: "2912.99999" })).paper, null, "an unknown id is null");
    assert.equal(await errorCode(request("PaperPage", { id: "not an id" })), "BAD_USER_INPUT");
  });

  test("ResearchersList: numbered pages of researchers", async () => {
    const data = await request("ResearchersList", { first: 5, page: 1 });
    assertPaging(data.researchers, 5, "researchers");
    data.researchers.nodes.forEach((r, i) => {
      assertShape(r, researcherLink, `researchers.nodes[${i}]`);
      assert.ok(r.slug.startsWith(`${r.databaseId}-`), "slug is <id>-<name words>");
    });
    assert.ok(data.researchers.nodes.length > 0, "the demo data has researchers");
    seen.researcher = data.researchers.nodes[0];
  });

  test("ResearcherPage: profile and a page of 24 papers, each by this researcher", async () => {
    const { databaseId, slug } = seen.researcher;
    const data = await request("ResearcherPage", { id: String(databaseId) });
    const r = data.researcher;
    assertShape(
      r,
      {
        ...researcherLink,
        paperCount: isInt,
        hIndex: isInt,
        citationCount: isInt,
        worksCount: isInt,
        externalIds: { semanticScholar: nullOr(isString), openAlex: nullOr(isString), orcid: nullOr(isString) },
        authorPositions: { first: isInt, middle: isInt, last: isInt, solo: isInt, matchedPapers: isInt, totalPapers: isInt },
        fields: listOf((f) => isString(f.category) && isInt(f.count)),
        citationSummary: { total: isInt, papersWithCounts: isInt },
      },
      "researcher",
    );
    const pos = r.authorPositions;
    assert.equal(pos.first + pos.middle + pos.last + pos.solo, pos.matchedPapers, "positions cover the matched papers");
    assert.ok(pos.matchedPapers <= pos.totalPapers);
    assert.equal(r.fields.reduce((n, f) => n + f.count, 0), r.paperCount, "fields count every paper once");
    if (r.mostCitedPaper !== null) {
      assertShape(r.mostCitedPaper, { id: isString, arxivId: isString, slug: isString, title: isString, citedByCount: isInt }, "mostCitedPaper");
      assert.ok(r.papers.nodes.every((p) => (p.citedByCount ?? -1) <= r.mostCitedPaper.citedByCount), "nothing on the page is cited more");
    }
    assert.equal(r.slug, slug);
    r.institutions.forEach((inst, i) => assertShape(inst, institutionLink, `researcher.institutions[${i}]`));
    assertPaging(r.papers, 24, "researcher.papers");
    assert.ok(r.papers.totalCount > 0);
    r.papers.nodes.forEach((p, i) => {
      assertShape(p, { ...paperItem, ...analysis }, `researcher.papers.nodes[${i}]`);
      assertAuthors(p.authors, `researcher.papers.nodes[${i}].authors`, { institutions: true });
      assert.ok(p.authors.some((a) => a.researcher?.databaseId === databaseId), "the researcher is among the authors");
    });
    assertNewestFirst(r.papers.nodes, "researcher.papers");
    const bySlug = await request("ResearcherPage", { id: slug });
    assert.deepEqual(bySlug, data);
    const category = r.papers.nodes[0].categories[0];
    const filtered = await request("ResearcherPage", { id: slug, filter: { category }, sort: "MOST_CITED" });
    filtered.researcher.papers.nodes.forEach((p) => assert.ok(p.categories.includes(category)));
    assert.equal((await request("ResearcherPage", { id: "999999999" })).researcher, null);
  });

  test("InstitutionsList and InstitutionPage: by ROR id and by name", async () => {
    const list = await request("InstitutionsList", { first: 5 });
    assertPaging(list.institutions, 5, "institutions");
    assert.ok(list.institutions.nodes.length > 0, "the demo data has institutions");
    const inst = list.institutions.nodes[0];
    assertShape(inst, { ...institutionLink, rorId: isString, country: nullOr(isString), type: nullOr(isString) }, "institution");
    const byRor = await request("InstitutionPage", { id: inst.rorId });
    const page = byRor.institution;
    assert.equal(page.databaseId, inst.databaseId);
    assert.ok(Array.isArray(page.aliases));
    assertPaging(page.papers, 24, "institution.papers");
    page.papers.nodes.forEach((p, i) => {
      assertShape(p, paperItem, `institution.papers.nodes[${i}]`);
      assertAuthors(p.authors, `institution.papers.nodes[${i}].authors`, { institutions: false });
    });
    page.researchers.nodes.forEach((r, i) => assertShape(r, researcherLink, `institution.researchers.nodes[${i}]`));
    const byName = await request("InstitutionPage", { id: inst.name });
    assert.equal(byName.institution.databaseId, inst.databaseId);
  });

  test("PaperList: browsing one category, most cited first", async () => {
    const category = seen.paper.primaryCategory;
    const data = await request("PaperList", { filter: { category }, sort: "MOST_CITED", first: 10, page: 1 });
    assertPaging(data.papers, 10, "papers");
    assert.ok(data.papers.totalCount > 0);
    data.papers.nodes.forEach((p, i) => {
      assertShape(p, { ...paperItem, ...analysis }, `papers.nodes[${i}]`);
      assert.ok(p.categories.includes(category));
      assertAuthors(p.authors, `papers.nodes[${i}].authors`, { institutions: false });
    });
    const counts = data.papers.nodes.map((p) => p.citedByCount ?? -1);
    assert.deepEqual(counts, [...counts].sort((a, b) => b - a), "most cited first");
    assert.equal(await errorCode(request("PaperList", { first: 101 })), "BAD_USER_INPUT");
  });

  test("SitemapPage: pages of slugs and modification times, walked with after", async () => {
    const first = await request("SitemapPage", { kind: "PAPER", first: 2 });
    const entries = first.sitemap.entries;
    assert.equal(entries.length, 2);
    entries.forEach((e, i) => assertShape(e, { databaseId: isInt, slug: isString, modifiedAt: isDate }, `entries[${i}]`));
    assert.equal(first.sitemap.hasNextPage, true);
    const next = await request("SitemapPage", { kind: "PAPER", first: 2, after: first.sitemap.endCursor });
    const ids = new Set(entries.map((e) => e.databaseId));
    next.sitemap.entries.forEach((e) => assert.ok(!ids.has(e.databaseId), "pages do not overlap"));
    for (const kind of ["RESEARCHER", "INSTITUTION"]) {
      const page = await request("SitemapPage", { kind, first: 3 });
      assert.ok(page.sitemap.entries.length > 0, `${kind} sitemap has entries`);
    }
  });

  test("ResolvePath: an id redirects to the canonical slug; unknown is NOT_FOUND", async () => {
    const { arxivId, slug } = seen.paper;
    const moved = await request("ResolvePath", { path: `/papers/${arxivId}` });
    assert.deepEqual(moved.resolvePath.path, `/papers/${slug}`);
    assert.equal(moved.resolvePath.redirect, true);
    assert.equal(moved.resolvePath.node.__typename, "Paper");
    const canonical = await request("ResolvePath", { path: `/papers/${slug}` });
    assert.equal(canonical.resolvePath.redirect, false);
    const researcher = await request("ResolvePath", { path: `/researchers/${seen.researcher.databaseId}` });
    assert.equal(researcher.resolvePath.path, `/researchers/${seen.researcher.slug}`);
    assert.equal(await errorCode(request("ResolvePath", { path: "/papers/2912.99999" })), "NOT_FOUND");
  });

  test("Persisted documents: the site's operations by documentId over GET, cacheable by a CDN", async () => {
    const manifest = JSON.parse(readFileSync(new URL("../persisted-documents.json", import.meta.url), "utf8"));
    const documentId = Object.keys(manifest).find((id) => manifest[id] === operation("ResearcherPage"));
    assert.ok(documentId, "ResearcherPage is in persisted-documents.json");
    const variables = { id: String(seen.researcher.databaseId) };
    const url = `${API}?documentId=${encodeURIComponent(documentId)}&variables=${encodeURIComponent(JSON.stringify(variables))}`;
    const got = await fetch(url);
    assert.equal(got.status, 200);
    assert.deepEqual(await got.json(), { data: await request("ResearcherPage", variables) });
    assert.match(got.headers.get("cache-control"), /^public, max-age=\d+/);
    assert.ok(got.headers.get("surrogate-key").split(" ").includes(`researcher:${seen.researcher.databaseId}`));
    const again = await fetch(url, { headers: { "if-none-match": got.headers.get("etag") } });
    assert.equal(again.status, 304);
  });
  const TOKEN = process.env.WOVEPAPER_VIEWER_TOKEN;
  test(
    "ViewerFeed, FollowResearcher, UnfollowResearcher: a signed-in reader's follows and feed",
    { skip: TOKEN ? false : "WOVEPAPER_VIEWER_TOKEN is not set" },
    async () => {
      const reader = new GraphQLClient(API, { headers: { accept: "application/json", authorization: `Bearer ${TOKEN}` } });
      const signedIn = (name, variables) => reader.request(operation(name), variables);
      const id = String(seen.researcher.databaseId);
      assert.equal(await errorCode(request("FollowResearcher", { id })), "UNAUTHENTICATED", "anonymous readers cannot follow");
      const state = { id: isString, databaseId: isInt, viewerIsFollowing: (v) => typeof v === "boolean", followerCount: isInt };
      const followed = (await signedIn("FollowResearcher", { id })).followResearcher.researcher;
      assertShape(followed, state, "followResearcher.researcher");
      assert.equal(followed.viewerIsFollowing, true);
      const again = (await signedIn("FollowResearcher", { id })).followResearcher.researcher;
      assert.equal(again.followerCount, followed.followerCount, "following twice is one follow");
      const page = (await signedIn("ViewerFeed", { first: 5 })).viewer;
      assert.ok(isString(page.feedUrl) && /\/rss\/feed\/[A-Za-z0-9_-]+\.xml$/.test(page.feedUrl), "a personal RSS link");
      assert.ok(page.following.nodes.some((r) => r.databaseId === followed.databaseId), "listed among the followed");
      const nodes = page.feed.nodes;
      assert.ok(nodes.length > 0 && nodes.length <= 5);
      const feedItem = { id: isString, databaseId: isInt, arxivId: isString, slug: isString, title: isString, published: isDate, absUrl: isString };
      nodes.forEach((p, i) => {
        assertShape(p, feedItem, `viewer.feed.nodes[${i}]`);
        assert.ok(p.authors.some((a) => a.researcher?.databaseId === followed.databaseId), "by the followed researcher");
      });
      assertNewestFirst(nodes, "viewer.feed");
      if (page.feed.pageInfo.hasNextPage) {
        const next = (await signedIn("ViewerFeed", { first: 5, after: page.feed.pageInfo.endCursor })).viewer.feed.nodes;
        const ids = new Set(nodes.map((p) => p.databaseId));
        next.forEach((p) => assert.ok(!ids.has(p.databaseId), "feed pages do not overlap"));
      }
      const gone = (await signedIn("UnfollowResearcher", { id })).unfollowResearcher.researcher;
      assert.equal(gone.viewerIsFollowing, false);
      assert.equal(gone.followerCount, followed.followerCount - 1);
      assert.equal((await signedIn("ViewerFeed", { first: 5 })).viewer.feed.nodes.length, 0, "nothing followed, an empty feed");
      assert.equal((await request("ViewerFeed", {})).viewer, null, "anonymous: no viewer");
    },
  );
});
