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

function request()
  return wrk.format(nil, os.getenv("TARGET_PATH") or "/graphql", nil, bodies[math.random(#bodies)])
end
