-- wrk script: POST a random JSON body from BODIES (one GraphQL request body per line).
-- Every server gets bodies for the same researcher ids; only the query text differs.
local bodies = {}

function init(args)
  local path = os.getenv("BODIES")
  for line in io.lines(path) do
    if #line > 0 then bodies[#bodies + 1] = line end
  end
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json"
end

-- CLIENTS=N: each request from one of N client addresses (X-Forwarded-For, for a server that trusts the loopback
-- proxy), as the anonymous readers behind a proxy are.
local clients = tonumber(os.getenv("CLIENTS") or "0")

function request()
  local headers = nil
  if clients > 0 then
    -- wrk.format takes these instead of wrk.headers, not besides them.
    headers = {}
    for name, value in pairs(wrk.headers) do headers[name] = value end
    local n = math.random(clients)
    headers["X-Forwarded-For"] = string.format("10.%d.%d.%d", math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
  end
  return wrk.format(nil, os.getenv("TARGET_PATH") or "/graphql", headers, bodies[math.random(#bodies)])
end
