-- API keys for partners and the site's server: a prefix to name a key by (listing, revoking) without
-- the secret, the browser origins a key may be used from, when it was last used; a key without its own
-- points per hour takes the server's WOVEPAPER_KEY_POINTS_PER_HOUR.
ALTER TABLE api_keys
    ADD COLUMN prefix text,
    ADD COLUMN allowed_origins text[] NOT NULL DEFAULT '{}',
    ADD COLUMN last_used_at timestamptz,
    ALTER COLUMN points_per_hour DROP NOT NULL,
    ALTER COLUMN points_per_hour DROP DEFAULT,
    ADD CONSTRAINT api_keys_points_per_hour_positive CHECK (points_per_hour > 0);

CREATE UNIQUE INDEX api_keys_prefix ON api_keys (prefix);
