package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts behind every write (and Stat). Scripts run atomically on
// the server; all keys they touch are passed in KEYS and share one hash tag.
//
// Numbers: Lua computes with doubles, exact up to 2^53; Seqs are about
// 1.8e15, and string.format('%.0f') writes them back as plain decimals
// (tostring would write 1.8e+15).

// prelude holds the functions the append and put-state scripts share. Both
// take KEYS[1] msgs, KEYS[2] state, KEYS[3] seq, KEYS[4] nss.
const prelude = `

-- nextSeqs reserves count numbers and returns the first: max(counter+1,
-- server clock in microseconds), so numbers are never handed out twice even
-- after the counter is deleted.
local function nextSeqs(count)
  local last = redis.call('GET', KEYS[3])
  if last then
    last = tonumber(last)
    if not last then return nil end
  else
    last = 0
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local first = last + 1
  if now > first then first = now end
  redis.call('SET', KEYS[3], string.format('%.0f', first + count - 1))
  return first
end

-- ttlBefore returns the PTTL of the shared keys before the script changes
-- them (-2: absent, -1: no expiry).
local function ttlBefore(ttl)
  if ttl <= 0 then return -1, -1 end
  return redis.call('PTTL', KEYS[3]), redis.call('PTTL', KEYS[4])
end

-- refresh applies the TTL after a write: the namespace's keys get ttl; the
-- shared keys get at least ttl and never lose a longer expiry, and a shared
-- key kept forever by a namespace without TTL stays so. Without TTL every
-- key is made persistent (SET already cleared the seq key's expiry).
local function refresh(ttl, seqBefore, nssBefore)
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
    if seqBefore ~= -1 then redis.call('PEXPIRE', KEYS[3], math.max(seqBefore, ttl)) end
    if nssBefore ~= -1 then redis.call('PEXPIRE', KEYS[4], math.max(nssBefore, ttl)) end
  else
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[2])
    redis.call('PERSIST', KEYS[4])
  end
end
`

// appendScript: KEYS msgs, state, seq, nss; ARGV namespace, ttl in ms (0:
// none), then one "<flag>|<encoded message>" per message. It returns the
// first Seq as a decimal string.
var appendScript = redis.NewScript(prelude + `
local ttl = tonumber(ARGV[2])
local n = #ARGV - 2
local seqBefore, nssBefore = ttlBefore(ttl)
local first = nextSeqs(n)
if not first then return {'corrupt-seq'} end
local batch = {}
for i = 1, n do
  batch[#batch + 1] = string.format('%.0f', first + i - 1) .. '|' .. ARGV[i + 2]
  if #batch == 500 or i == n then
    redis.call('RPUSH', KEYS[1], unpack(batch))
    batch = {}
  end
end
redis.call('SADD', KEYS[4], ARGV[1])
refresh(ttl, seqBefore, nssBefore)
return {'ok', string.format('%.0f', first)}
`)

// putStateScript: KEYS msgs, state, seq, nss; ARGV namespace, ttl in ms,
// name, expected version (decimal), "put" or "del", value. It returns
// {'ok', version}, {'conflict', current version} or {'corrupt'}.
var putStateScript = redis.NewScript(prelude + `
local cur = redis.call('HGET', KEYS[2], ARGV[3])
local curv = '0'
if cur then
  curv = string.match(cur, '^(%d+)|')
  if not curv then return {'corrupt'} end
end
if curv ~= ARGV[4] then return {'conflict', curv} end
if ARGV[5] == 'del' then
  if cur then redis.call('HDEL', KEYS[2], ARGV[3]) end
  return {'ok', '0'}
end
local ttl = tonumber(ARGV[2])
local seqBefore, nssBefore = ttlBefore(ttl)
local v = nextSeqs(1)
if not v then return {'corrupt-seq'} end
v = string.format('%.0f', v)
redis.call('HSET', KEYS[2], ARGV[3], v .. '|' .. ARGV[6])
redis.call('SADD', KEYS[4], ARGV[1])
refresh(ttl, seqBefore, nssBefore)
return {'ok', v}
`)

// statScript: KEYS msgs. It returns {count, first Seq, last Seq} with the
// Seqs as decimal strings (empty when an end element has no readable Seq),
// without sending message bodies back.
var statScript = redis.NewScript(`
local n = redis.call('LLEN', KEYS[1])
if n == 0 then return {0, '0', '0'} end
local a = redis.call('LINDEX', KEYS[1], 0)
local b = redis.call('LINDEX', KEYS[1], -1)
return {n, string.match(a, '^(%d+)|') or '', string.match(b, '^(%d+)|') or ''}
`)

// removePrefixScript: KEYS msgs; ARGV through (decimal). It scans the list
// from the head while Seq <= through, drops the non-system elements and
// puts the system ones back in their order. It returns {'ok', removed} or
// {'corrupt', list index}.
var removePrefixScript = redis.NewScript(`
local through = tonumber(ARGV[1])
local keep = {}
local scanned = 0
local removed = 0
local chunk = 256
local done = false
while not done do
  local items = redis.call('LRANGE', KEYS[1], scanned, scanned + chunk - 1)
  for i = 1, #items do
    local s, f = string.match(items[i], '^(%d+)|([sm])|')
    if not s then return {'corrupt', scanned} end
    if tonumber(s) > through then done = true break end
    scanned = scanned + 1
    if f == 's' then keep[#keep + 1] = items[i] else removed = removed + 1 end
  end
  if #items < chunk then done = true end
end
if removed == 0 then return {'ok', 0} end
local pttl = redis.call('PTTL', KEYS[1])
redis.call('LTRIM', KEYS[1], scanned, -1)
for i = #keep, 1, -1 do redis.call('LPUSH', KEYS[1], keep[i]) end
if pttl > 0 then redis.call('PEXPIRE', KEYS[1], pttl) end
return {'ok', removed}
`)

// clearScript: KEYS msgs, state, nss; ARGV namespace.
var clearScript = redis.NewScript(`
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
return 'ok'
`)

// forgetScript: KEYS seq, nss, then the msgs and state keys of every
// namespace named in ARGV. It deletes every key unless the nss set names a
// namespace the caller did not pass ({'retry'}: read the set again) or the
// counter is ahead of the clock by less than maxForgetWaitMicros
// ({'wait', microseconds}: deleting it now could let a Seq be handed out
// twice).
var forgetScript = redis.NewScript(`
local last = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if last >= now and last - now < 2000000 then
  return {'wait', string.format('%.0f', last - now + 1)}
end
local known = {}
for i = 1, #ARGV do known[ARGV[i]] = true end
for _, m in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if not known[m] then return {'retry'} end
end
redis.call('DEL', unpack(KEYS))
return {'ok'}
`)
