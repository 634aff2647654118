-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- THROTTLE.RELEASE key capacity rate slot [INFLIGHT n]: with INFLIGHT, a slot freed from a
-- table that held n is announced, so that a caller waiting for one looks again at once; with
-- callers in line, the slot is handed to the head and announced as `handed <id> <wait_ms>`. A
-- waiter's ticket in line leaves the line (it gave up, or its call was cancelled): written,
-- nothing announced. 1 if the slot was held (or the ticket in line), else 0.
local function release(keys, args, quota)
  local id = parse_slot(args[3])
  if not id then
    return fail('slot_id')
  end
  local cap_text
  local i = 4
  while i <= #args do
    if string.upper(args[i]) ~= 'INFLIGHT' then
      return fail('release_option')
    end
    if i == #args then
      return fail('missing', 'INFLIGHT', 'INFLIGHT')
    end
    if cap_text then
      return fail('repeated', 'INFLIGHT')
    end
    cap_text = args[i + 1]
    i = i + 2
  end
  local cap
  if cap_text then
    cap = whole(cap_text, MAX_INFLIGHT)
    if not cap or cap < 1 then
      return fail('inflight')
    end
  end
  local b, err = open(keys[1], quota)
  if not b then
    return fail(err)
  end
  local held = held_at(b.slots, b.now_s, b.now_n)
  local freed
  local slots = with_slot(b, id, function(one)
    freed = one
    return nil
  end)
  if not slots then
    -- A waiter's ticket: it leaves the line (the module's line::left_line), with no settling.
    local line = b.slots and b.slots.line
    for i = 1, line and #line or 0 do
      local w = line[i]
      if w[1] == id and lt(b.now_s, b.now_n, w[2], w[3]) then
        local table_after = pruned(b.slots, b.now_s, b.now_n)
        local rest = {}
        for j = 1, #table_after.line do
          if table_after.line[j][1] ~= id then
            rest[#rest + 1] = table_after.line[j]
          end
        end
        set_line(table_after, rest)
        store(keys[1], b.base_s, b.base_n, b.pushback, b.now_s, b.now_n, table_after, b.kept)
        return 1
      end
    end
    return 0
  end
  -- With callers in line, the freed slot (and any whose lease ran out) goes to the head of the
  -- line at once, under the cap the line waits under; its tokens are taken then.
  local tat_s, tat_n, handed = b.base_s, b.base_n, nil
  slots = pruned(slots, b.now_s, b.now_n)
  if slots and slots.line then
    -- The line learns its pace from how much lease the holders leave unused.
    slots.slack = slack_after(slots.slack, sub2(freed[2], freed[3], b.now_s, b.now_n))
    tat_s, tat_n, slots, handed = settle(b.quota, b, tat_s, tat_n, slots, slots.cap)
  end
  store(keys[1], tat_s, tat_n, b.pushback, b.now_s, b.now_n, slots, b.kept)
  -- After the write: the first waiter handed a slot hears it, with its ticket and its tokens'
  -- wait; else a slot freed from a full table is, protected too (a server that refuses it still
  -- frees the slot: the waiters find it when they look again).
  if not announce_handed(keys[1], handed) and cap and held >= cap then
    redis.pcall('SPUBLISH', pause_channel(keys[1]), 'freed')
  end
  return 1
end

