-- bench/redis_bucket.lua: the token bucket a developer would run in Redis,
-- for bench/run to measure beside the memory engine.  KEYS[1] is the
-- bucket (a hash of tokens and stamp), ARGV its rate (tokens a second),
-- burst and the cost of this call; refill is continuous, in floating
-- point, on the server's clock (TIME), a new key starts full, and a denial
-- takes nothing.  Returns 1 if granted, 0 if denied.
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local time = redis.call('TIME')
local now = tonumber(time[1]) + tonumber(time[2]) / 1000000
local stored = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens = tonumber(stored[1])
local stamp = tonumber(stored[2])
if tokens == nil then
    tokens = burst
    stamp = now
elseif now > stamp then
    tokens = math.min(burst, tokens + (now - stamp) * rate)
    stamp = now
end
local allowed = 0
if tokens >= cost then
    tokens = tokens - cost
    allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'stamp', stamp)
return allowed
