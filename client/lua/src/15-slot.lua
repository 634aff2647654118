-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh
-- The slots of `b` with the one whose id is `id` changed by `change` (given the slot, it
-- returns the new one, or nil to drop it), if it is held at `b`'s now; nil if it is not.
local function with_slot(b, id, change)
  local slots = b.slots
  for k = 1, slots and #slots or 0 do
    local one = slots[k]
    if one[1] == id and lt(b.now_s, b.now_n, one[2], one[3]) then
      local changed = { next = slots.next, line = slots.line, cap = slots.cap,
        slack = slots.slack }
      for j = 1, #slots do
        if j ~= k then
          changed[#changed + 1] = slots[j]
        else
          changed[#changed + 1] = change(one)
        end
      end
      return changed
    end
  end
  return nil
end

