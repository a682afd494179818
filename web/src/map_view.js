// The Shard map view: the maps of the committed plan (one for a job
// without model parallelism; one per slot (tp, pp) for a model-parallel
// job, titled "slot tp T pp P", its ranks the slot's data-parallel ranks
// and its owners the members at that slot), each drawn by ZS.drawMap with
// the previous plan's map, the moves and the dead members' ranges.
'use strict';

// The maps of `plan` (GetPlan's answer without a slot): [{slot, plan, map,
// moves, base, total}], slot null for a job without model parallelism.
ZS.loadMaps = async function (plan) {
  const slots = plan.slots && plan.slots.length ? plan.slots : [null];
  const out = [];
  for (const s of slots) {
    const slot = s && (s.slot || {});
    const sel = slot ? { slot: { tp: ZS.num(slot.tp), pp: ZS.num(slot.pp) } } : {};
    const p = s ? s.plan || {} : plan;
    const map = await ZS.loadMap(p, sel);
    const withMoves = await ZS.dash('GetPlan', Object.assign({ moves: true }, sel));
    out.push({
      slot: slot && { tp: ZS.num(slot.tp), pp: ZS.num(slot.pp) }, plan: p, map,
      moves: withMoves.moves || [], base: ZS.num(withMoves.baseEpoch), total: ZS.num(withMoves.totalMoves),
    });
  }
  return out;
};

// The workers whose ranges flash: those `status` (GetClusterStatus) lists
// as dead, and those named by `deadEvents` (a Set from the event stream).
// The map drawn is the last committed plan's, so they flash until the
// plan that replaces them arrives, where they own nothing.
ZS.deadWorkers = function (status, deadEvents) {
  const out = new Set(deadEvents || []);
  for (const m of (status && status.members) || []) {
    if (m.state === 'MEMBER_STATE_DEAD') out.add(m.name);
  }
  return out;
};

// Draws `maps` (loadMaps) into `root`; `previous` is the maps before the
// latest transition (may be null), `dead` a Set of worker names.
ZS.drawMaps = function (root, maps, previous, dead) {
  const prev = (i) => (previous && previous[i] ? previous[i].map : null);
  if (maps.length === 1 && !maps[0].slot) {
    ZS.drawMap(root, maps[0].map, prev(0), dead, maps[0].moves, ZS.num(maps[0].plan.shardGroupSize));
    return;
  }
  root.replaceChildren();
  maps.forEach((m, i) => {
    const body = ZS.el('div', { class: 'slot-body' });
    root.appendChild(ZS.el('div', { class: 'slot-map', 'data-tp': m.slot.tp, 'data-pp': m.slot.pp }, [
      ZS.el('h3', {}, 'slot tp ' + m.slot.tp + ' pp ' + m.slot.pp),
      ZS.el('p', { class: 'caption' }, 'data-parallel world ' + ZS.num(m.plan.world) + ' = ' +
        ZS.num(m.plan.instances) + ' x ' + ZS.num(m.plan.shardGroupSize) + ', plan ' + m.plan.planHash),
      body]));
    ZS.drawMap(body, m.map, prev(i), dead, m.moves, ZS.num(m.plan.shardGroupSize));
  });
};
