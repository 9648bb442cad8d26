"""One service process: its life (ServiceRunner), typed settings and every BERTH_* variable,
Redis connections and credentials, retry loops, background tasks and the one Lua loader."""
