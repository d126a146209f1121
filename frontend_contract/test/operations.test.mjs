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
const read = (path) => readFileSync(new URL(`../${path}.graphql`, import.meta.url), "utf8");
// An operation's document as the site sends it: its file, then each fragment it spreads (fragments/, one a file),
// once, in the order first spread, as the API's manifest holds it (edge/persisted.py, operation_documents).
const operation = (name) => {
  const parts = [read(`operations/${name}`)];
  const seen = new Set();
  for (let i = 0; i < parts.length; i++) {
    for (const [, spread] of parts[i].replace(/#[^\n]*/g, "").matchAll(/\.\.\.\s*(?!on\b)([_A-Za-z][_0-9A-Za-z]*)/g)) {
      if (!seen.has(spread)) {
        seen.add(spread);
        parts.push(read(`fragments/${spread}`));
      }
    }
  }
  return parts.join("\n");
};

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
    assertShape(
      byId.paper,
      {
        ...paperItem,
        ...analysis,
        version: isInt,
        updated: isDate,
        doi: nullOr(isString),
        license: nullOr(isString),
        withdrawn: (v) => v === false,
        modifiedAt: isDate,
        versions: listOf((v) => isInt(v.version) && isDate(v.submittedAt)),
        externalIds: { semanticScholar: nullOr(isString), openAlex: nullOr(isString), doi: isString, journalDoi: nullOr(isString) },
      },
      "paper",
    );
    assert.equal(byId.paper.externalIds.doi, `10.48550/arXiv.${arxivId}`);
    assert.deepEqual(byId.paper.versions.map((v) => v.version), [...Array(byId.paper.version).keys()].map((i) => i + 1));
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
        fields: listOf((f) => isString(f.category) && isInt(f.count) && isInt(f.primaryCount) && f.count >= f.primaryCount),
        modifiedAt: isDate,
        citationSummary: { total: isInt, papersWithCounts: isInt },
      },
      "researcher",
    );
    const pos = r.authorPositions;
    assert.equal(pos.first + pos.middle + pos.last + pos.solo, pos.matchedPapers, "positions cover the matched papers");
    assert.ok(pos.matchedPapers <= pos.totalPapers);
    assert.equal(r.fields.reduce((n, f) => n + f.primaryCount, 0), r.paperCount, "primary fields count every paper once");
    if (r.mostCitedPaper !== null) {
      assertShape(r.mostCitedPaper, { id: isString, arxivId: isString, slug: isString, title: isString, citedByCount: isInt }, "mostCitedPaper");
      assert.ok(r.papers.nodes.every((p) => (p.citedByCount ?? -1) <= r.mostCitedPaper.citedByCount), "nothing on the page is cited more");
    }
    assert.equal(r.slug, slug);
    r.affiliations.forEach((a, i) => assertShape(a.institution, institutionLink, `researcher.affiliations[${i}]`));
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
    // The count beside each field's link is what the link lists.
    for (const field of r.fields.slice(0, 3)) {
      const filtered = await request("ResearcherPage", { id: slug, filter: { category: field.category }, sort: "MOST_CITED" });
      assert.equal(filtered.researcher.papers.totalCount, field.count, `${field.category}: count is what the link lists`);
      filtered.researcher.papers.nodes.forEach((p) => assert.ok(p.categories.includes(field.category)));
    }
    // A page past the end is an empty page with the true totals, not a missing researcher.
    const past = await request("ResearcherPage", { id: slug, page: 5000 });
    assert.equal(past.researcher.name, r.name);
    assert.deepEqual([past.researcher.papers.nodes, past.researcher.papers.totalCount], [[], r.papers.totalCount]);
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
    assert.equal(page.externalIds.ror, inst.rorId);
    assert.equal(page.paperCount, page.papers.totalCount, "the count beside the list is the list's");
    assert.equal((await request("InstitutionPage", { id: `${inst.name} of Nowhere` })).institution, null, "never a guess");
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

  test("SitemapPage: numbered chunks of site paths, every entry once", async () => {
    const first = await request("SitemapPage", { kind: "PAPER", chunk: 0, chunkSize: 500 });
    assertShape(first.sitemap, { chunk: isInt, chunkCount: isInt, totalCount: isInt }, "sitemap");
    assert.ok(first.sitemap.chunkCount >= 2);
    let seen = 0;
    for (let chunk = 0; chunk < first.sitemap.chunkCount; chunk++) {
      const page = chunk === 0 ? first : await request("SitemapPage", { kind: "PAPER", chunk, chunkSize: 500 });
      assert.ok(page.sitemap.entries.length <= 500);
      page.sitemap.entries.forEach((e, i) => {
        assertShape(e, { id: isString, path: isString, modifiedAt: isDate }, `chunk ${chunk} entries[${i}]`);
        assert.ok(e.path.startsWith("/papers/"));
      });
      seen += page.sitemap.entries.length;
    }
    assert.equal(seen, first.sitemap.totalCount, "the chunks hold every entry once");
    for (const kind of ["RESEARCHER", "INSTITUTION"]) {
      const page = await request("SitemapPage", { kind, chunk: 0 });
      assert.ok(page.sitemap.entries.length > 0, `${kind} sitemap has entries`);
    }
  });

  test("ResolvePath: an id redirects to the canonical slug; unknown is null", async () => {
    const { arxivId, slug } = seen.paper;
    const moved = await request("ResolvePath", { path: `/papers/${arxivId}` });
    assert.deepEqual(moved.resolvePath.path, `/papers/${slug}`);
    assert.equal(moved.resolvePath.redirect, true);
    assert.equal(moved.resolvePath.matchedBy, "ID");
    assert.equal(moved.resolvePath.node.__typename, "Paper");
    const canonical = await request("ResolvePath", { path: `/papers/${slug}` });
    assert.equal(canonical.resolvePath.redirect, false);
    const researcher = await request("ResolvePath", { path: `/researchers/${seen.researcher.databaseId}` });
    assert.equal(researcher.resolvePath.path, `/researchers/${seen.researcher.slug}`);
    assert.equal((await request("ResolvePath", { path: "/papers/2912.99999" })).resolvePath, null, "a 404");
  });

  test("Search: a page of hits with facets and highlights; the facet count is what its filter lists", async () => {
    const word = seen.paper.title.split(/[^A-Za-z]+/).filter((w) => w.length > 4)[0];
    const data = await request("Search", { query: word, first: 10 });
    const s = data.search;
    assertShape(s, { totalCount: isInt, totalPages: isInt, matchCount: isInt, matchCountIsEstimate: (v) => typeof v === "boolean" }, "search");
    assert.ok(s.totalCount > 0 && s.edges.length > 0 && s.edges.length <= 10);
    s.edges.forEach((e, i) => {
      assert.ok(typeof e.score === "number", `edges[${i}].score`);
      assertShape(e.node, { id: isString, arxivId: isString, slug: isString, title: isString, withdrawn: (v) => v === false }, `edges[${i}].node`);
      assertAuthors(e.node.authors, `edges[${i}].node.authors`, { institutions: false });
    });
    assert.ok(s.edges.some((e) => (e.highlights.title ?? "").includes("<mark>") || (e.highlights.abstract ?? "").includes("<mark>")));
    const top = s.facets.categories.values[0];
    if (!s.matchCountIsEstimate) {
      const narrowed = await request("Search", { query: word, filter: { category: top.value }, first: 1 });
      assert.equal(narrowed.search.totalCount, top.count, "a facet's count is what its filter lists");
    }
    assert.equal(await errorCode(request("Search", { query: "the of" })), "BAD_USER_INPUT");
  });

  test("Autocomplete: researchers, institutions and papers while typing", async () => {
    const name = seen.researcher.name;
    const data = await request("Autocomplete", { query: name.slice(0, 5), types: ["RESEARCHER", "INSTITUTION", "PAPER"] });
    assert.ok(data.autocomplete.length > 0 && data.autocomplete.length <= 8);
    data.autocomplete.forEach((s, i) =>
      assertShape(s, { type: isString, id: isString, databaseId: isInt, label: isString, slug: isString, hint: nullOr(isString) }, `autocomplete[${i}]`),
    );
    const exact = await request("Autocomplete", { query: name, types: ["RESEARCHER"] });
    assert.ok(exact.autocomplete.some((s) => s.databaseId === seen.researcher.databaseId), "the researcher typed in full is suggested");
  });

  test("ResearcherNetwork: the co-author graph around a researcher", async () => {
    const data = await request("ResearcherNetwork", { id: seen.researcher.slug, depth: 2, limit: 60 });
    const net = data.researcher.network;
    assert.ok(net.nodes.length > 1 && net.nodes.length <= 60);
    assert.equal(net.nodes.filter((n) => n.depth === 0).length, 1);
    assert.equal(net.nodes.find((n) => n.depth === 0).researcher.databaseId, seen.researcher.databaseId);
    const ids = new Set(net.nodes.map((n) => n.researcher.id));
    net.edges.forEach((e, i) => {
      assert.ok(ids.has(e.source) && ids.has(e.target), `edges[${i}] joins two nodes`);
      assert.ok(isInt(e.sharedPapers) && e.sharedPapers >= 1);
    });
    assert.equal(await errorCode(request("ResearcherNetwork", { id: seen.researcher.slug, depth: 3 })), "BAD_USER_INPUT");
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
  test(
    "ViewerResearcherState, ClaimResearcher, ReportAuthorship, ViewerCorrections, ResearcherCorrections: corrections",
    { skip: TOKEN ? false : "WOVEPAPER_VIEWER_TOKEN is not set" },
    async () => {
      const reader = new GraphQLClient(API, { headers: { accept: "application/json", authorization: `Bearer ${TOKEN}` } });
      const signedIn = (name, variables) => reader.request(operation(name), variables);
      const id = String(seen.researcher.databaseId);
      const state = (await signedIn("ViewerResearcherState", { id })).researcher;
      assertShape(state, { id: isString, databaseId: isInt, claimed: (v) => typeof v === "boolean", viewerOwns: (v) => v === false }, "researcher");
      assert.equal(await errorCode(request("ClaimResearcher", { id })), "UNAUTHENTICATED", "anonymous readers cannot claim");
      // The harness's token carries no ORCID iD: the claim waits for an operator, and asking again is the same one.
      const claimed = (await signedIn("ClaimResearcher", { id, note: "This is me." })).claimResearcher;
      assertShape(claimed.correction, { id: isString, kind: (v) => v === "CLAIM", status: (v) => v === "PENDING", createdAt: isDate }, "correction");
      assert.equal((await signedIn("ClaimResearcher", { id })).claimResearcher.correction.id, claimed.correction.id);
      const page = await request("ResearcherPage", { id, first: 1 });
      const paperId = page.researcher.papers.nodes[0].arxivId;
      const notMe = (await signedIn("ReportAuthorship", { paperId, researcherId: id, kind: "NOT_ME" })).reportAuthorship;
      assert.equal(notMe.correction.status, "PENDING", "not the profile's owner: an operator decides");
      assert.equal(notMe.researcher.paperCount, page.researcher.paperCount, "nothing changed yet");
      const elsewhere = "2912.99999";
      assert.equal(await errorCode(signedIn("ReportAuthorship", { paperId: elsewhere, researcherId: id, kind: "IS_ME" })), "NOT_FOUND");
      const mine = (await signedIn("ViewerCorrections", { first: 10 })).viewer;
      const ids = mine.corrections.nodes.map((c) => c.id);
      assert.ok(ids.includes(claimed.correction.id) && ids.includes(notMe.correction.id), "the reader's corrections");
      mine.corrections.nodes.forEach((c, i) => {
        assertShape(c, { id: isString, kind: isString, status: isString, reason: nullOr(isString), createdAt: isDate, decidedAt: nullOr(isDate) }, `viewer.corrections.nodes[${i}]`);
        c.researchers.forEach((r, j) => assertShape(r, researcherLink, `viewer.corrections.nodes[${i}].researchers[${j}]`));
      });
      const log = (await request("ResearcherCorrections", { id })).researcher;
      assert.ok(Array.isArray(log.corrections), "a public log, applied corrections only");
      log.corrections.forEach((e, i) => assertShape(e, { id: isString, kind: isString, appliedAt: isDate, summary: isString }, `corrections[${i}]`));
    },
  );
});
