package redisstore

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts behind every write (and Tail, Stat, GetState and
// Export's reads). Scripts run atomically on the server; all keys they
// touch are passed in KEYS and share one hash slot: the identity's keys share its
// hash tag, and the slot's forgotten key has a tag chosen to hash to the
// same slot (see slotTag), so every script runs on one node of a Redis
// Cluster.
//
// Numbers: Lua computes with doubles, exact up to 2^53; Seqs are about
// 1.8e15, and string.format('%.0f') writes them back as plain decimals
// (tostring would write 1.8e+15).
//
// Exactly once: every write but Forget takes a token, a random string the
// call draws once (see newToken) and sends with every attempt of the
// script — or, for an Append under an append key, a token derived from the
// namespace and the key (appendKeyToken), the same for every client. The
// first run that changes anything records the token and its reply in the
// identity's ops hash; a later run with the same token — a client retrying
// after the reply was lost, or another Append under the same key —
// changes nothing and returns the recorded reply. Tokens are kept for
// tokenWindow.

// tokenWindowMillis is tokenWindow in milliseconds, as the scripts use it.
var tokenWindowMillis = strconv.FormatInt(tokenWindow.Milliseconds(), 10)

// tokens holds the functions that record and look up tokens. KEYS of the
// ops hash (token → reply) and the opq list ("<ms> <token>", oldest first)
// are passed in, so scripts with other KEYS use them too.
var tokens = `
local window = ` + tokenWindowMillis + `

-- replayed returns the reply recorded for token, or nil.
local function replayed(ops, token)
  local r = redis.call('HGET', ops, token)
  if r then return r end
  return nil
end

-- remember records reply for token for the window, and forgets up to
-- four tokens older than the window (each call adds one, so the queue
-- drains). Both keys expire a window after the last write.
local function remember(ops, opq, token, reply)
  local t = redis.call('TIME')
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', ops, token, reply)
  redis.call('RPUSH', opq, string.format('%.0f', ms) .. ' ' .. token)
  for _ = 1, 4 do
    local head = redis.call('LINDEX', opq, 0)
    if not head then break end
    local at, old = string.match(head, '^(%d+) (.+)$')
    if at and tonumber(at) > ms - window then break end
    redis.call('LPOP', opq)
    if old then redis.call('HDEL', ops, old) end
  end
  redis.call('PEXPIRE', ops, window)
  redis.call('PEXPIRE', opq, window)
end
`

// sysIndex holds the functions that read and keep a namespace's index of
// its system messages, the sys key: a list whose head is a marker and
// whose other elements are copies of the msgs list's system elements, in
// the list's (Seq) order. The marker, "0|i|<head Seq>|<tail Seq>" (Seq 0,
// which no message has), names the Seqs at the list's two ends when the
// index was last made exact: every script of this package that changes
// the list changes the index in the same step and sets the marker anew.
// A writer that does not keep the index — a replica still running the
// build before it, during a rolling upgrade — changes an end of the list
// whenever it changes the list's system messages (it appends, or removes
// a prefix, or deletes the list), so the marker no longer matches: Tail
// then rebuilds the index, and writes delete it. A list without an index
// was written before the index existed: writes leave it so (their cost
// stays what it was) and the first Tail builds the index, reading the list
// once.
var sysIndex = `
-- headOf returns the Seq (a canonical decimal string) and the role flag
-- ('s' or 'm') of a list element, or nil when it has no such head.
local function headOf(e)
  local s, f = string.match(e, '^([1-9]%d*)|([sm])|')
  if s and #s <= 18 then return s, f end
  return nil
end

-- markerOf returns the marker of an exact index of the list msgs as it
-- is now, or nil when msgs is empty.
local function markerOf(msgs)
  local h = redis.call('LINDEX', msgs, 0)
  if not h then return nil end
  local t = redis.call('LINDEX', msgs, -1)
  return '0|i|' .. (string.match(h, '^(%d+)|') or '?') .. '|' .. (string.match(t, '^(%d+)|') or '?')
end

-- indexMode returns how a script about to change the list msgs keeps its
-- index sys: 'keep' (sys is the list's exact index: keep it so), 'new'
-- (msgs is empty: a new index starts, replacing any left without its
-- list), or nil (no index, or a stale one: sealIndex drops it). It writes
-- nothing.
local function indexMode(msgs, sys)
  local m = markerOf(msgs)
  if not m then return 'new' end
  if redis.call('LINDEX', sys, 0) == m then return 'keep' end
  return nil
end

-- pushAll appends the elements of list to key, in batches within Lua's
-- unpack limit.
local function pushAll(key, list)
  for i = 1, #list, 500 do
    redis.call('RPUSH', key, unpack(list, i, math.min(i + 499, #list)))
  end
end

-- startIndex makes sys an empty index (its marker set by sealIndex).
local function startIndex(sys)
  if redis.call('EXISTS', sys) == 1 then redis.call('UNLINK', sys) end
  redis.call('RPUSH', sys, '0|i')
end

-- sealIndex ends a script that changed msgs, kept its index as mode says
-- and left it exact (mode 'keep' or 'new'): the marker names the list's
-- new ends. Without a mode, or when the list is now empty, any index left
-- is dropped.
local function sealIndex(msgs, sys, mode)
  local m = markerOf(msgs)
  if mode and m then
    redis.call('LSET', sys, 0, m)
  elseif redis.call('EXISTS', sys) == 1 then
    redis.call('UNLINK', sys)
  end
end
`

// prelude holds the functions the scripts of one identity and namespace
// share: append, put-state, get-state, clear and rewrite. All of them take
// the same KEYS, every one in the identity's hash slot:
//
//	KEYS[1] msgs, KEYS[2] state, KEYS[3] seq, KEYS[4] nss,
//	KEYS[5] cleared (the namespace's Clear mark),
//	KEYS[6] forgotten (the forgotten version of the identity's slot),
//	KEYS[7] ops, KEYS[8] opq (the identity's recent tokens),
//	KEYS[9] sys (the namespace's index of system messages; see sysIndex).
var prelude = tokens + sysIndex + `

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

-- raiseFloor raises the slot's forgotten version (KEYS[6]), the floor of
-- the absent version of every namespace without a Clear mark in the slot,
-- to at least v. A value that is not a version is left for absent to
-- report.
local function raiseFloor(v)
  local cur = redis.call('GET', KEYS[6])
  if cur and (not decimal(cur) or tonumber(cur) >= v) then return end
  redis.call('SET', KEYS[6], string.format('%.0f', v))
end

-- foldMark raises the slot's forgotten version to the namespace's Clear
-- mark, before a write gives the mark an expiry (refresh, with a TTL).
-- When the mark expires, the absent version falls to the forgotten
-- version: so it never goes back below the mark, and a commit that read
-- before the Clear (a version below the mark) still conflicts. A no-op
-- when the forgotten version is there already: after the first write of
-- the namespace with a TTL since its Clear, or for a mark that never
-- expires.
local function foldMark()
  local m = decimal(redis.call('GET', KEYS[5]))
  if m then raiseFloor(tonumber(m)) end
end

-- peekSeqs returns the first of the next count numbers, without taking
-- them: max(counter+1, server clock in microseconds, Clear mark+1,
-- forgotten version+1), so numbers are never handed out twice even after
-- the counter is deleted, and a version or mark drawn now is never an
-- absent version a reader already holds. (Unreadable marks and forgotten
-- versions are skipped here; absent reports them where they matter.) It
-- returns nil when the counter is not a number.
local function peekSeqs(count)
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
  return first
end

-- nextSeqs takes the next count numbers (see peekSeqs) and returns the
-- first, or nil, having written nothing, when the counter is not a number.
local function nextSeqs(count)
  local first = peekSeqs(count)
  if not first then return nil end
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
-- slot's forgotten key is not the identity's and never expires; with a
-- TTL it is first raised to the Clear mark (foldMark), which may now
-- expire. The token keys keep their own short expiry.
local function refresh(ttl, seqBefore, nssBefore)
  if ttl > 0 then
    foldMark()
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[2], ttl)
    redis.call('PEXPIRE', KEYS[5], ttl)
    redis.call('PEXPIRE', KEYS[9], ttl)
    if seqBefore ~= -1 then redis.call('PEXPIRE', KEYS[3], math.max(seqBefore, ttl)) end
    if nssBefore ~= -1 then redis.call('PEXPIRE', KEYS[4], math.max(nssBefore, ttl)) end
  else
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[2])
    redis.call('PERSIST', KEYS[4])
    redis.call('PERSIST', KEYS[5])
    redis.call('PERSIST', KEYS[9])
  end
end

-- push appends the elements of ARGV from index from on, one per message,
-- behind Seqs first, first+1, …, and keeps the index as mode (what
-- indexMode returned before the script changed the list) says: the
-- system elements ('s' flag) are copied to it. The script then calls
-- sealIndex.
local function push(first, from, mode)
  local elems, sys = {}, {}
  for i = from, #ARGV do
    local e = string.format('%.0f', first + i - from) .. '|' .. ARGV[i]
    elems[#elems + 1] = e
    if string.sub(ARGV[i], 1, 1) == 's' then sys[#sys + 1] = e end
  end
  pushAll(KEYS[1], elems)
  if mode == 'new' then startIndex(KEYS[9]) end
  if mode then pushAll(KEYS[9], sys) end
end
`

// appendScript: KEYS as in prelude, then (with a feed member) the user's
// change feed and the tenant's counter (feedKeys); ARGV token (under an append
// key, one derived from the key; see appendKeyToken), namespace, ttl in
// ms (0: none), the feed member (the identity's key, or an empty string
// when the store keeps no feed), then one "<flag>|<encoded message>" per message. It
// pushes the messages, copying the system ones to the index, and scores
// the member in the feed with the counter's next mark (max(counter+1,
// server clock in microseconds), so marks only grow, also after the
// counter is deleted): scripts run one at a time, so marks are given in
// the order the appends happen. It returns {'ok', first Seq} (a decimal
// string) or {'corrupt-seq'}; a run with a token already recorded stores
// nothing and returns the recorded reply.
var appendScript = redis.NewScript(prelude + `
local done = replayed(KEYS[7], ARGV[1])
if done then return {'ok', done} end
local ttl = tonumber(ARGV[3])
local n = #ARGV - 4
local seqBefore, nssBefore = ttlBefore(ttl)
local mode = indexMode(KEYS[1], KEYS[9])
local first = nextSeqs(n)
if not first then return {'corrupt-seq'} end
push(first, 5, mode)
sealIndex(KEYS[1], KEYS[9], mode)
redis.call('SADD', KEYS[4], ARGV[2])
refresh(ttl, seqBefore, nssBefore)
if ARGV[4] ~= '' then
  local c = tonumber(redis.call('GET', KEYS[11]) or '0') or 0
  local t = redis.call('TIME')
  local m = string.format('%.0f', math.max(c + 1, tonumber(t[1]) * 1000000 + tonumber(t[2])))
  redis.call('SET', KEYS[11], m)
  redis.call('ZADD', KEYS[10], m, ARGV[4])
end
local r = string.format('%.0f', first)
remember(KEYS[7], KEYS[8], ARGV[1], r)
return {'ok', r}
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

// putStateScript: KEYS as in prelude; ARGV token, namespace, ttl in ms,
// name, expected version (decimal), "put" or "del", value. The current
// version is the value's, or, for an absent value, the absent version —
// read in this script, on the identity's slot, so Clear and Forget (one
// script each, on the same slot) happen wholly before or wholly after it.
// It returns {'ok', version} (for "del", the absent version afterwards),
// {'conflict', current version}, {'corrupt'} (the value has no version),
// or {'corrupt-seq'}, {'corrupt-mark'} or {'corrupt-forgotten'}. An 'ok'
// is recorded with the token, so a retry of a write whose reply was lost
// returns the version it wrote rather than a conflict with itself.
var putStateScript = redis.NewScript(prelude + `
local done = replayed(KEYS[7], ARGV[1])
if done then return {'ok', done} end
local cur = redis.call('HGET', KEYS[2], ARGV[4])
local curv
if cur then
  curv = string.match(cur, '^(%d+)|')
  if not curv then return {'corrupt'} end
else
  local bad
  curv, bad = absent()
  if not curv then return {bad} end
end
if curv ~= ARGV[5] then return {'conflict', curv} end
if ARGV[6] == 'del' then
  if not cur then
    remember(KEYS[7], KEYS[8], ARGV[1], curv)
    return {'ok', curv}
  end
  local a, bad = absent()
  if not a then return {bad} end
  redis.call('HDEL', KEYS[2], ARGV[4])
  remember(KEYS[7], KEYS[8], ARGV[1], a)
  return {'ok', a}
end
local ttl = tonumber(ARGV[3])
local seqBefore, nssBefore = ttlBefore(ttl)
local v = nextSeqs(1)
if not v then return {'corrupt-seq'} end
v = string.format('%.0f', v)
redis.call('HSET', KEYS[2], ARGV[4], v .. '|' .. ARGV[7])
redis.call('SADD', KEYS[4], ARGV[2])
refresh(ttl, seqBefore, nssBefore)
remember(KEYS[7], KEYS[8], ARGV[1], v)
return {'ok', v}
`)

// clearScript: KEYS as in prelude; ARGV token, namespace, ttl in ms. In
// one step it deletes the namespace's messages (and their index) and
// state and sets its Clear mark to a fresh number from the identity's
// counter — greater than every version, mark and forgotten version a
// reader could hold — so a PutState that read before it conflicts after
// it; with a TTL, the mark expires, so the slot's forgotten version is
// raised to it too (refresh, foldMark), and the conflict outlives the
// mark. The namespace stays in
// the nss set: Forget must find the mark. It returns {'ok'} or
// {'corrupt-seq'}; a retry with the same token changes nothing (it would
// otherwise delete what others wrote since the first run). It deletes
// before it writes: at maxmemory with noeviction, Redis refuses a script's
// first command that needs memory unless the script has already written,
// so a Clear still runs on a full server, and frees memory.
var clearScript = redis.NewScript(prelude + `
if replayed(KEYS[7], ARGV[1]) then return {'ok'} end
local ttl = tonumber(ARGV[3])
local seqBefore, nssBefore = ttlBefore(ttl)
local m = peekSeqs(1)
if not m then return {'corrupt-seq'} end
redis.call('UNLINK', KEYS[1], KEYS[2], KEYS[9])
redis.call('SET', KEYS[3], string.format('%.0f', m))
redis.call('SET', KEYS[5], string.format('%.0f', m))
redis.call('SADD', KEYS[4], ARGV[2])
refresh(ttl, seqBefore, nssBefore)
remember(KEYS[7], KEYS[8], ARGV[1], 'ok')
return {'ok'}
`)

// rewriteScript: KEYS as in prelude; ARGV token, namespace, ttl in ms,
// through (decimal), '1' to reset or '0', then one "<flag>|<encoded
// message>" per message. In one step it removes every element with Seq <=
// through (the list's Seqs increase from head to tail, so they are a
// prefix of it, system messages included, and those from the index), with
// reset deletes the state and sets a fresh Clear mark as Clear does, and
// appends the messages behind Seqs drawn after the mark (a list removed
// whole starts a new index, so Rewrite migrates it). It returns {'ok',
// removed} (a decimal string), {'corrupt', list index} or {'corrupt-seq'},
// having changed nothing in the last two cases.
var rewriteScript = redis.NewScript(prelude + `
local done = replayed(KEYS[7], ARGV[1])
if done then return {'ok', done} end
local ttl = tonumber(ARGV[3])
local through = tonumber(ARGV[4])
local reset = ARGV[5] == '1'
local n = #ARGV - 5
local mode = indexMode(KEYS[1], KEYS[9])
local len = redis.call('LLEN', KEYS[1])
local removed, sysRemoved = 0, 0
if len > 0 then
  local tail = string.match(redis.call('LINDEX', KEYS[1], -1), '^(%d+)|')
  if not tail then return {'corrupt', len - 1} end
  if tonumber(tail) <= through then
    removed = len
  else
    local page = 256
    local stop = false
    while not stop do
      local items = redis.call('LRANGE', KEYS[1], removed, removed + page - 1)
      for i = 1, #items do
        local s = string.match(items[i], '^(%d+)|')
        if not s then return {'corrupt', removed} end
        if tonumber(s) > through then stop = true break end
        if string.match(items[i], '^%d+|s|') then sysRemoved = sysRemoved + 1 end
        removed = removed + 1
      end
      if #items < page then stop = true end
    end
  end
end
if removed == 0 and n == 0 and not reset then return {'ok', '0'} end
local seqBefore, nssBefore = ttlBefore(ttl)
local mark, first
if reset then
  mark = nextSeqs(1)
  if not mark then return {'corrupt-seq'} end
end
if n > 0 then
  first = nextSeqs(n)
  if not first then return {'corrupt-seq'} end
end
if removed == len and len > 0 then
  redis.call('UNLINK', KEYS[1])
  mode = 'new'
elseif removed > 0 then
  redis.call('LTRIM', KEYS[1], removed, -1)
  if mode == 'keep' and sysRemoved > 0 then
    -- The removed system elements are the oldest of the index: drop
    -- them, keeping the key (and its TTL) and the marker's place. An
    -- index shorter than that is not the list's: sealIndex drops it.
    if redis.call('LLEN', KEYS[9]) > sysRemoved then
      redis.call('LTRIM', KEYS[9], sysRemoved, -1)
    else
      mode = nil
    end
  end
end
if reset then
  redis.call('UNLINK', KEYS[2])
  redis.call('SET', KEYS[5], string.format('%.0f', mark))
end
if n > 0 then push(first, 6, mode) end
sealIndex(KEYS[1], KEYS[9], mode)
redis.call('SADD', KEYS[4], ARGV[2])
refresh(ttl, seqBefore, nssBefore)
local r = string.format('%d', removed)
remember(KEYS[7], KEYS[8], ARGV[1], r)
return {'ok', r}
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

// tailScript: KEYS msgs, sys (the namespace's index of system messages);
// ARGV n (>= 1), after (decimals). It returns {'ok', the system elements,
// the newest n non-system elements with Seq > after (oldest first), how
// many elements it read from the two lists}, or {'corrupt', list index} or
// {'corrupt-index', index position}, read in one step: never half of an
// Append. The system elements come from the index; the others from pages
// read backwards from the list's tail, each no larger than the number
// still missing, stopping at the first Seq <= after; pages start at 32
// elements and double up to 1,000, so reading up to after costs at most
// about twice what it returns. So it reads the system messages, the
// messages it returns, the system ones among them and at most one page
// more: O(what it returns), however long the list. A list without an
// index (written before there was one), or with a stale one (see
// sysIndex), is read whole to build it, once — the migration; if that
// write fails (a full server refusing it), the reply is the same and the
// next Tail tries again. Every head it returns was
// checked (headOf), so the decoder never meets one it would reject.
var tailScript = redis.NewScript(sysIndex + `
local n, after = tonumber(ARGV[1]), tonumber(ARGV[2])
local m = markerOf(KEYS[1])
if not m then return {'ok', {}, {}, 0} end
local len = redis.call('LLEN', KEYS[1])
local read = 0
local sys
local cur = redis.call('LINDEX', KEYS[2], 0)
if cur == m then
  sys = redis.call('LRANGE', KEYS[2], 1, -1)
  read = #sys
  for i = 1, #sys do
    local _, f = headOf(sys[i])
    if f ~= 's' then return {'corrupt-index', i} end
  end
else
  sys = {}
  for from = 0, len - 1, 1000 do
    local items = redis.call('LRANGE', KEYS[1], from, from + 999)
    read = read + #items
    for i = 1, #items do
      local s, f = headOf(items[i])
      if not s then return {'corrupt', from + i - 1} end
      if f == 's' then sys[#sys + 1] = items[i] end
    end
  end
  if cur then redis.call('UNLINK', KEYS[2]) end
  if type(redis.pcall('RPUSH', KEYS[2], m)) == 'number' then
    pushAll(KEYS[2], sys)
    local pttl = redis.call('PTTL', KEYS[1])
    if pttl > 0 then redis.call('PEXPIRE', KEYS[2], pttl) end
  end
end
local rest = {}
local stop = len -- the elements before list index stop are not read yet
local page = 32
while stop > 0 and #rest < n do
  local from = math.max(stop - math.min(n - #rest, page), 0)
  local items = redis.call('LRANGE', KEYS[1], from, stop - 1)
  read = read + #items
  stop = from
  page = math.min(page * 2, 1000)
  for i = #items, 1, -1 do
    local s, f = headOf(items[i])
    if not s then return {'corrupt', from + i - 1} end
    if tonumber(s) <= after then stop = 0 break end
    if f == 'm' then
      rest[#rest + 1] = items[i]
      if #rest == n then break end
    end
  end
end
local out = {}
for i = #rest, 1, -1 do out[#out + 1] = rest[i] end
return {'ok', sys, out, read}
`)

// removeChunkScript: KEYS msgs, ops, opq, sys; ARGV token, through
// (decimal), limit. It removes at most limit non-system elements with Seq
// <= through from the head of the list, keeping the system ones in their
// order ahead of the rest; through is first lowered to the Seq of the list's tail, so
// the chunks of one RemovePrefix never chase messages appended after it
// began. It returns {'ok', "<removed> <more> <through>"} — more is 1 when
// a non-system element with Seq <= through is left — or {'corrupt', list
// index}, having changed nothing. A chunk that removed something records
// its reply with the token, so a retry removes nothing more and returns
// the same count. Its cost is O(limit + the system messages at the head).
// It keeps every system element, so the index keeps its elements (and
// gets the list's new ends in its marker), unless the list is left empty:
// then the index goes too.
var removeChunkScript = redis.NewScript(tokens + sysIndex + `
local done = replayed(KEYS[2], ARGV[1])
if done then return {'ok', done} end
local mode = indexMode(KEYS[1], KEYS[4])
local through = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local tail = redis.call('LINDEX', KEYS[1], -1)
if not tail then return {'ok', '0 0 0'} end
local ts = string.match(tail, '^(%d+)|')
if not ts then return {'corrupt', redis.call('LLEN', KEYS[1]) - 1} end
if tonumber(ts) < through then through = tonumber(ts) end
local keep = {}
local scanned, removed, more = 0, 0, 0
local page = 256
local stop = false
while not stop do
  local items = redis.call('LRANGE', KEYS[1], scanned, scanned + page - 1)
  for i = 1, #items do
    local s, f = string.match(items[i], '^(%d+)|([sm])|')
    if not s then return {'corrupt', scanned} end
    if tonumber(s) > through then stop = true break end
    if f == 'm' then
      if removed == limit then more = 1 stop = true break end
      removed = removed + 1
    else
      keep[#keep + 1] = items[i]
    end
    scanned = scanned + 1
  end
  if #items < page then stop = true end
end
local r = string.format('%d %d %.0f', removed, more, through)
if removed == 0 then return {'ok', r} end
local pttl = redis.call('PTTL', KEYS[1])
redis.call('LTRIM', KEYS[1], scanned, -1)
for i = #keep, 1, -1 do redis.call('LPUSH', KEYS[1], keep[i]) end
if pttl > 0 then redis.call('PEXPIRE', KEYS[1], pttl) end
sealIndex(KEYS[1], KEYS[4], mode)
remember(KEYS[2], KEYS[3], ARGV[1], r)
return {'ok', r}
`)

// exportScript: KEYS msgs, state, cleared of one namespace. It returns
// {every list element, the state hash as field, value, …, the Clear mark
// or an empty string}, read in one step.
var exportScript = redis.NewScript(`
return {redis.call('LRANGE', KEYS[1], 0, -1), redis.call('HGETALL', KEYS[2]), redis.call('GET', KEYS[3]) or ''}
`)

// clockWait holds clockWait(v), for scripts about to delete a counter v
// drawn from the server's clock (Seqs, change-feed marks): it returns the
// clock in microseconds and, when v is ahead of it by less than 2 s, how
// many microseconds to wait before deleting (a later draw, max(counter+1,
// clock), must stay above v), else nil.
var clockWait = `
local function clockWait(v)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if v >= now and v - now < 2000000 then
    return now, string.format('%.0f', v - now + 1)
  end
  return now, nil
end
`

// dropCounterScript: KEYS a tenant's counter of change-feed marks. It
// deletes it, or returns {'wait', microseconds} while the counter is ahead
// of the server's clock by less than 2 s (the next mark, max(counter+1,
// clock), must stay above every mark handed out), else {'ok'}.
var dropCounterScript = redis.NewScript(clockWait + `
local c = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local _, wait = clockWait(c)
if wait then return {'wait', wait} end
redis.call('UNLINK', KEYS[1])
return {'ok'}
`)

// forgetScript: KEYS seq, nss, forgotten (the slot's), ops, opq, then the
// msgs, state, cleared and sys keys of every namespace named in ARGV, then
// any other key of the identity (found by SCAN), then, when ARGV[1] is
// '1', the change feed (feedKeys) of the identity's user; ARGV that flag,
// the identity's key (its member in the feed), then the namespaces. It
// takes the identity out of the feed in the same step as it deletes its
// keys, so an append just after is a change no reader misses. It returns {'retry'} when the
// nss set names a namespace the caller did not pass (read the set again),
// {'wait', microseconds} when the counter is ahead of the clock by less
// than 2 s (deleting it now could let a Seq be handed out twice), and else
// {'ok'} after doing, in one step (no other command runs in between):
//
//  1. draw the slot's new forgotten version: max(forgotten+1, clock,
//     counter+1, every Clear mark+1), greater than every version, mark and
//     absent version any reader of the identity could hold, and never
//     equal to an earlier forgotten version even if that key was lost;
//  2. delete every key of the identity;
//  3. store the new forgotten version.
//
// Why 1 and 3 are needed, in the same step as 2: after Forget nothing of
// the identity is left, so the forgotten version is all that tells a
// PutState whose expect was read before Forget (a value's version, a mark,
// or the absent version then) from one read after. PutState compares with
// it inside its own script, on this same slot, so it runs wholly before
// this script (and what it wrote is deleted in 2) or wholly after (the
// name is absent, no mark, so its current version is the new forgotten
// version, which no earlier read returned: it conflicts). Were the keys
// deleted in one step and the forgotten version moved in another, a
// PutState between the two would find the name absent at the old
// forgotten version — the very version a reader from before Forget holds
// — and store its value after everything was removed. The deletion comes
// before the write for the reason Clear's does: at maxmemory with
// noeviction a Forget still runs, and frees memory.
//
// It takes no token: a second run (a client retrying after the reply was
// lost) is a second Forget, which leaves what one leaves — nothing of the
// identity, and a fresh forgotten version — and removes whatever was
// written between the two runs, as a Forget called just then would.
var forgetScript = redis.NewScript(clockWait + `
local feeds = tonumber(ARGV[1]) -- 0 or 1: the last key is the user's feed
local nns = #ARGV - 2
local last = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local now, wait = clockWait(last)
if wait then return {'wait', wait} end
local known = {}
for i = 3, #ARGV do known[ARGV[i]] = true end
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
for i = 8, 5 + 4 * nns, 4 do cand[#cand + 1] = number(redis.call('GET', KEYS[i])) end
for _, v in ipairs(cand) do
  if v + 1 > f then f = v + 1 end
end
local del = {KEYS[1], KEYS[2]}
for i = 4, #KEYS - feeds do
  del[#del + 1] = KEYS[i]
  if #del == 500 then
    redis.call('UNLINK', unpack(del))
    del = {}
  end
end
if #del > 0 then redis.call('UNLINK', unpack(del)) end
for i = #KEYS - feeds + 1, #KEYS do redis.call('ZREM', KEYS[i], ARGV[2]) end
redis.call('SET', KEYS[3], string.format('%.0f', f))
return {'ok'}
`)
