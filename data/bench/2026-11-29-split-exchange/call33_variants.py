import sys
p='kernels/hopper/wgmma_mainloop.cuh'; s=open(p).read()
v=sys.argv[1]
def rep(old,new):
    global s
    assert old in s, old[:60]; s=s.replace(old,new)
if v=='fold':
    rep("""        collect_scores(p.softmax_scale * mma::kLog2e, map.exchange, (j + 1) % Wt::kExchangeParities, at, carry.s,
                       scores);""","""        collect_scores(kUnitScale, map.exchange, (j + 1) % Wt::kExchangeParities, at, carry.s, scores);""")
    rep("""        const bool rescale = softmax_step(scores, kUnitScale, state, prob_next, alpha);""","""        const bool rescale = softmax_step<PackBf16, true>(scores, p.softmax_scale * mma::kLog2e, state, prob_next, alpha);""")
elif v=='late':
    rep("""        if (j + 3 < g.num_tiles) issue_chunk(k_stream, p, table_row, g.kv_end, map, 2 * j + 6, at);
    }
    float scores""","""        if (!kIssueNext && j + 3 < g.num_tiles) issue_chunk(k_stream, p, table_row, g.kv_end, map, 2 * j + 6, at);
    }
    float scores""")
    rep("""            issue_scores(map.q, ring_chunk(map, 2 * j + 4), at.group, carry.s);  // K_j+2 landed (top of the step)
""","""            issue_scores(map.q, ring_chunk(map, 2 * j + 4), at.group, carry.s);  // K_j+2 landed (top of the step)
            if (issues_copies(at) && j + 3 < g.num_tiles)
                issue_chunk(k_stream, p, table_row, g.kv_end, map, 2 * j + 6, at);
""")
elif v=='early':
    rep("""    pin_all(carry.s);
    if (!v_landed) wait_chunk(map, 2 * j + 1, at.group);  // V_j""","""    pin_all(carry.s);
    if (kHasNext) post_scores(map.exchange, (j + 1) % Wt::kExchangeParities, at, carry.s);
    if (!v_landed) wait_chunk(map, 2 * j + 1, at.group);  // V_j""")
    rep("""    if (kHasNext) post_scores(map.exchange, (j + 1) % Wt::kExchangeParities, at, carry.s);
    if (issues_copies(at)) {""","""    if (issues_copies(at)) {""")
open(p,'w').write(s)
