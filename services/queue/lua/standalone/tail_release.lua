-- The informer's tailer lease (services/queue/informer.py): let it go, when this replica holds it.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
