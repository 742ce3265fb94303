package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts behind every write (and Stat and GetState). Scripts run
// atomically on the server; all keys they touch are passed in KEYS and
// share one hash slot: the identity's keys share its hash tag, and the
// slot's forgotten key has a tag chosen to hash to the same slot (see
// slotTag), so every script runs on one node of a Redis Cluster.
//
// Numbers: Lua computes with doubles, exact up to 2^53; Seqs are about
// 1.8e15, and string.format('%.0f') writes them back as plain decimals
// (tostring would write 1.8e+15).

// prelude holds the functions the scripts of one identity and namespace
// share: append, put-state, get-state and clear. All of them take the same
// KEYS, every one in the identity's hash slot:
//
//	KEYS[1] msgs, KEYS[2] state, KEYS[3] seq, KEYS[4] nss,
//	KEYS[5] cleared (the namespace's Clear mark),
//	KEYS[6] forgotten (the forgotten version of the identity's slot).
const prelude = `

-- decimal returns v if it is a version as this package writes one (a
-- canonical positive decimal), else nil.
local function decimal(v)
  if v and string.match(v, '^[1-9]%d*$') and #v <= 18 then return v end
  return nil
end

-- absent returns the namespace's absent version as a decimal string: the
-- Clear mark, else the slot's forgotten version, else '0'. It returns nil
-- and 'corrupt-mark' or 'corrupt-forgotten' when the value it would return
-- is not a version.
local function absent()
  local m = redis.call('GET', KEYS[5])
  if m then
    if decimal(m) then return m end
    return nil, 'corrupt-mark'
  end
  local f = redis.call('GET', KEYS[6])
  if f then
    if decimal(f) then return f end
    return nil, 'corrupt-forgotten'
  end
  return '0'
end

-- nextSeqs reserves count numbers and returns the first: max(counter+1,
-- server clock in microseconds, Clear mark+1, forgotten version+1), so
-- numbers are never handed out twice even after the counter is deleted,
-- and a version or mark drawn now is never an absent version a reader
-- already holds. (Unreadable marks and forgotten versions are skipped
-- here; absent reports them where they matter.)
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
  for i = 5, 6 do
    local v = decimal(redis.call('GET', KEYS[i]))
    if v and tonumber(v) + 1 > first then first = tonumber(v) + 1 end
  end
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
-- key is made persistent (SET already cleared the seq key's expiry). The
-- slot's forgotten key is not the identity's and never expires.
local function refresh(ttl, seqBefore, nssBefore)
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
    redis.call('PEXPIRE', KEYS[5], ttl)
    if seqBefore ~= -1 then redis.call('PEXPIRE', KEYS[3], math.max(seqBefore, ttl)) end
    if nssBefore ~= -1 then redis.call('PEXPIRE', KEYS[4], math.max(nssBefore, ttl)) end
  else
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[2])
    redis.call('PERSIST', KEYS[4])
    redis.call('PERSIST', KEYS[5])
  end
end
`

// appendScript: KEYS as in prelude; ARGV namespace, ttl in ms (0: none),
// then one "<flag>|<encoded message>" per message. It returns the first Seq
// as a decimal string.
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

// getStateScript: KEYS as in prelude; ARGV name. It returns {'value',
// "<version>|<value>"} when the name has a value, {'absent', absent
// version} when it has none, or {'corrupt-mark'} or {'corrupt-forgotten'}.
// One script, so a reader sees a Clear or Forget all before or all after.
var getStateScript = redis.NewScript(prelude + `
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then return {'value', cur} end
local a, bad = absent()
if not a then return {bad} end
return {'absent', a}
`)

// putStateScript: KEYS as in prelude; ARGV namespace, ttl in ms, name,
// expected version (decimal), "put" or "del", value. The current version
// is the value's, or, for an absent value, the absent version — read in
// this script, on the identity's slot, so Clear and Forget (one script
// each, on the same slot) happen wholly before or wholly after it. It
// returns {'ok', version} (for "del", the absent version afterwards),
// {'conflict', current version}, {'corrupt'} (the value has no version),
// or {'corrupt-seq'}, {'corrupt-mark'} or {'corrupt-forgotten'}.
var putStateScript = redis.NewScript(prelude + `
local cur = redis.call('HGET', KEYS[2], ARGV[3])
local curv
if cur then
  curv = string.match(cur, '^(%d+)|')
  if not curv then return {'corrupt'} end
else
  local bad
  curv, bad = absent()
  if not curv then return {bad} end
end
if curv ~= ARGV[4] then return {'conflict', curv} end
if ARGV[5] == 'del' then
  if not cur then return {'ok', curv} end
  local a, bad = absent()
  if not a then return {bad} end
  redis.call('HDEL', KEYS[2], ARGV[3])
  return {'ok', a}
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

// clearScript: KEYS as in prelude; ARGV namespace, ttl in ms. In one step
// it deletes the namespace's messages and state and sets its Clear mark to
// a fresh number from the identity's counter — greater than every version,
// mark and forgotten version a reader could hold — so a PutState that read
// before it conflicts after it. The namespace stays in the nss set: Forget
// must find the mark. It returns {'ok'} or {'corrupt-seq'}.
var clearScript = redis.NewScript(prelude + `
local ttl = tonumber(ARGV[2])
local seqBefore, nssBefore = ttlBefore(ttl)
local m = nextSeqs(1)
if not m then return {'corrupt-seq'} end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SET', KEYS[5], string.format('%.0f', m))
redis.call('SADD', KEYS[4], ARGV[1])
refresh(ttl, seqBefore, nssBefore)
return {'ok'}
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

// forgetScript: KEYS seq, nss, forgotten (the slot's), then the msgs,
// state and cleared keys of every namespace named in ARGV. It returns
// {'retry'} when the nss set names a namespace the caller did not pass
// (read the set again), {'wait', microseconds} when the counter is ahead
// of the clock by less than 2 s (deleting it now could let a Seq be handed
// out twice), and else {'ok'} after doing, in this order and in one step:
//
//  1. draw the slot's new forgotten version: max(forgotten+1, clock,
//     counter+1, every Clear mark+1), greater than every version, mark and
//     absent version any reader of the identity could hold, and never
//     equal to an earlier forgotten version even if that key was lost;
//  2. delete every key of the identity.
//
// Why 1 is needed, and first: after Forget nothing of the identity is
// left, so the forgotten version is all that tells a PutState whose expect
// was read before Forget (a value's version, a mark, or the absent version
// then) from one read after. PutState compares with it inside its own
// script, on this same slot, so it runs wholly before this script (and
// what it wrote is deleted in 2) or wholly after (the name is absent, no
// mark, so its current version is the new forgotten version, which no
// earlier read returned: it conflicts). Were the keys deleted before the
// forgotten version moved, a PutState between the two steps would find the
// name absent at the old forgotten version — the very version a reader
// from before Forget holds — and store its value after everything was
// removed.
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
local function number(v)
  if v and string.match(v, '^[1-9]%d*$') and #v <= 18 then return tonumber(v) end
  return 0
end
local f = now
if last + 1 > f then f = last + 1 end
local cand = {number(redis.call('GET', KEYS[3]))}
for i = 6, #KEYS, 3 do cand[#cand + 1] = number(redis.call('GET', KEYS[i])) end
for _, v in ipairs(cand) do
  if v + 1 > f then f = v + 1 end
end
redis.call('SET', KEYS[3], string.format('%.0f', f))
local del = {KEYS[1], KEYS[2]}
for i = 4, #KEYS do del[#del + 1] = KEYS[i] end
redis.call('DEL', unpack(del))
return {'ok'}
`)
