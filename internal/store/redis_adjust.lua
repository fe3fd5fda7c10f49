-- Adjust: rate buckets of one owner corrected by deltas, for a cluster,
-- where a decision's buckets of other owners sit in other slots: a
-- settlement's corrections outside its ledger's slot (sent once the
-- ledger's settlement applied), or an admission's debits taken back
-- when another slot refused it.
--
-- KEYS: the buckets. ARGV: 1 id, 2 adjustments; then per adjustment:
-- limit, window us (negative: sliding), delta.
local now = clock()
adjust(KEYS, ARGV, 0, 2, tonumber(ARGV[2]), ARGV[1], now)
flush()
return 1
