// The shard map: per buffer and bucket, one bar per instance (per instance
// and expert-parallel group in an expert buffer) over the
// bucket's elements, cut where each rank's shard begins and coloured by the
// member that owns it; ticks where params begin; hover for the params and
// element ranges. Segments carry data-* attributes (buffer, bucket,
// instance, expert-rank, rank, worker, begin, end) that the browser tests
// read.
'use strict';

// Merges a bucket's pieces into each rank's contiguous ranges of bucket
// offsets: [{instance, expert, row, rank, worker, begin, end, pieces}],
// sorted by row (instance, then expert-parallel rank) and begin.
ZS.segments = function (pieces) {
  const byRank = new Map();
  for (const p of pieces) {
    const rank = ZS.num(p.rank);
    if (!byRank.has(rank)) byRank.set(rank, []);
    byRank.get(rank).push(p);
  }
  const out = [];
  for (const [rank, list] of byRank) {
    list.sort((a, b) => ZS.num(a.offsetInBucket) - ZS.num(b.offsetInBucket));
    let cur = null;
    for (const p of list) {
      const begin = ZS.num(p.offsetInBucket);
      const end = begin + ZS.num(p.paramEnd) - ZS.num(p.paramBegin);
      if (cur && cur.end === begin) {
        cur.end = end;
        cur.pieces.push(p);
      } else {
        const instance = ZS.num(p.instance);
        const expert = ZS.num(p.expertRank);
        cur = { instance, expert, row: ZS.rowKey(instance, expert), rank, worker: p.worker || '', begin, end, pieces: [p] };
        out.push(cur);
      }
    }
  }
  out.sort((a, b) => a.row - b.row || a.begin - b.begin);
  return out;
};

// The bucket's pieces for every (buffer, bucket) of `plan` (GetPlan's
// summary): [{buffer, bucket, pieces}]. `select` is added to each request
// (a model-parallel job's {slot: {tp, pp}}).
ZS.loadMap = async function (plan, select) {
  const out = [];
  const buffers = plan.buffers || [];
  for (let b = 0; b < buffers.length; ++b) {
    for (let k = 0; k < ZS.num(buffers[b].buckets); ++k) {
      out.push({ buffer: b, bucket: k, pieces: await ZS.planPieces(Object.assign({ buffer: b, bucket: k }, select)) });
    }
  }
  return out;
};

const kWidth = 960;
const kRow = 30;

// A row of the map: an instance, and in an expert buffer its
// expert-parallel group (each group holds other experts at the same
// offsets).
ZS.rowKey = (instance, expert) => instance * 4096 + expert;

// The row that held `rank`'s bytes at `offset` of (buffer,
// bucket) in `map` (a loadMap result), or -1.
function rowOf(map, buffer, bucket, rank, offset) {
  for (const bk of map || []) {
    if (bk.buffer !== buffer || bk.bucket !== bucket) continue;
    for (const s of ZS.segments(bk.pieces)) {
      if (s.rank === rank && s.begin <= offset && offset < s.end) return s.row;
    }
  }
  return -1;
}

// Draws `buckets` (from loadMap) into `root`. `previous` (may be null) is
// the map before the latest transition: segments whose owner changed are
// drawn as moved. `dead` names workers whose ranges flash. `moves`
// (GetPlan's PlanMove list for this epoch, may be empty) are drawn as
// arrows from the sender's range to the receiver's.
ZS.drawMap = function (root, buckets, previous, dead, moves, groupSize) {
  root.replaceChildren();
  const before = new Map();
  for (const bk of previous || []) {
    for (const s of ZS.segments(bk.pieces)) {
      before.set([bk.buffer, bk.bucket, s.row, s.begin, s.end].join('/'), s.worker);
    }
  }
  const tip = document.getElementById('tip');
  const owners = new Map();
  for (const bk of buckets) {
    for (const s of ZS.segments(bk.pieces)) owners.set(s.worker, s.rank);
  }
  const legend = ZS.el('div', { class: 'legend' });
  for (const [worker, rank] of [...owners].sort((a, b) => a[1] - b[1])) {
    legend.appendChild(ZS.el('span', { class: 'swatch', style: 'background:' + ZS.colour(worker) }, ''));
    legend.appendChild(ZS.el('span', { class: 'owner' + (dead && dead.has(worker) ? ' dead' : '') },
      worker + ' (rank ' + rank + ')' + (dead && dead.has(worker) ? ' dead' : '')));
  }
  root.appendChild(legend);
  for (const bk of buckets) {
    const segs = ZS.segments(bk.pieces);
    if (segs.length === 0) continue;
    const rows = [...new Set(segs.map((s) => s.row))].sort((a, b) => a - b);
    const expertBuffer = segs.some((t) => t.expert > 0);
    let span = 0;
    for (const s of segs) span = Math.max(span, s.end);
    const x = (v) => 110 + (v / span) * (kWidth - 120);
    const svg = ZS.el('svg', { width: kWidth, height: rows.length * kRow + 8, class: 'bucket-map' });
    rows.forEach((inst, row) => {
      const y = 4 + row * kRow;
      const first = segs.find((t) => t.row === inst);
      svg.appendChild(ZS.el('text', { x: 4, y: y + 15, class: 'rowlabel' },
        'instance ' + first.instance + (expertBuffer ? ', group ' + first.expert : '')));
      for (const s of segs.filter((t) => t.row === inst)) {
        const key = [bk.buffer, bk.bucket, s.row, s.begin, s.end].join('/');
        const was = before.get(key);
        const cls = ['seg'];
        if (previous && was !== undefined && was !== s.worker) cls.push('moved');
        if (dead && dead.has(s.worker)) cls.push('dead');
        const r = ZS.el('rect', {
          x: x(s.begin), y, width: Math.max(1, x(s.end) - x(s.begin)), height: kRow - 4,
          fill: ZS.colour(s.worker), class: cls.join(' '),
          'data-buffer': bk.buffer, 'data-bucket': bk.bucket, 'data-instance': s.instance, 'data-expert-rank': s.expert,
          'data-rank': s.rank, 'data-worker': s.worker, 'data-begin': s.begin, 'data-end': s.end,
          'data-from': was !== undefined && was !== s.worker ? was : '',
        });
        const lines = ['rank ' + s.rank + ' (' + s.worker + ')  elements [' + s.begin + ', ' + s.end + ')'];
        if (r.getAttribute('data-from')) lines.push('moved from ' + was);
        for (const p of s.pieces) {
          lines.push(p.param + ' [' + ZS.num(p.paramBegin) + ', ' + ZS.num(p.paramEnd) + ')');
        }
        r.addEventListener('mousemove', (ev) => {
          tip.textContent = lines.join('\n');
          tip.style.left = ev.clientX + 12 + 'px';
          tip.style.top = ev.clientY + 12 + 'px';
          tip.hidden = false;
        });
        r.addEventListener('mouseleave', () => { tip.hidden = true; });
        svg.appendChild(r);
        const width = x(s.end) - x(s.begin);
        const label = 'r' + s.rank + ' ' + s.worker + (r.getAttribute('data-from') ? ' (from ' + was + ')' : '');
        if (width > label.length * 7) {
          svg.appendChild(ZS.el('text', { x: x(s.begin) + 4, y: y + 17, class: 'seglabel' }, label));
        }
        for (const p of s.pieces) {
          if (ZS.num(p.paramBegin) === 0) {
            const tx = x(ZS.num(p.offsetInBucket));
            svg.appendChild(ZS.el('line', { x1: tx, x2: tx, y1: y - 2, y2: y + kRow - 2, class: 'tick' }));
          }
        }
      }
    });
    for (const pm of moves || []) {
      const m = pm.move || {};
      if (ZS.num(m.buffer) !== bk.buffer || ZS.num(m.bucket) !== bk.bucket) continue;
      const to = ZS.num(m.offset);
      const len = ZS.num(m.length);
      const expert = ZS.num(m.expertRank);
      const toRow = rows.indexOf(ZS.rowKey(Math.floor(ZS.num(m.toRank) / Math.max(1, groupSize)), expert));
      if (toRow < 0) continue;
      const y = 4 + toRow * kRow;
      const from = ZS.num(pm.fromOffset);
      let fromRow = -1;
      if (ZS.num(pm.fromBuffer) === bk.buffer && ZS.num(pm.fromBucket) === bk.bucket) {
        const inst = previous ? rowOf(previous, bk.buffer, bk.bucket, ZS.num(m.fromRank), from)
          : ZS.rowKey(Math.floor(ZS.num(m.fromRank) / Math.max(1, groupSize)), expert);
        fromRow = rows.indexOf(inst);
      }
      const band = ZS.el('rect', {
        x: x(to), y: y + kRow - 8, width: Math.max(2, x(to + len) - x(to)), height: 4, class: 'move',
        'data-move-to': pm.toWorker || '', 'data-move-from': pm.fromWorker || 'checkpoint',
        'data-offset': to, 'data-length': len,
      });
      band.appendChild(ZS.el('title', {}, pm.param + ' [' + ZS.num(m.begin) + ', ' + ZS.num(m.end) + ') from ' +
        (pm.fromWorker ? 'rank ' + ZS.num(m.fromRank) + ' ' + pm.fromWorker : 'a checkpoint') +
        ' to rank ' + ZS.num(m.toRank) + ' ' + pm.toWorker));
      svg.appendChild(band);
      if (fromRow >= 0 && fromRow !== toRow) {
        const x0 = (x(from) + x(from + len)) / 2;
        const x1 = (x(to) + x(to + len)) / 2;
        const y0 = 4 + fromRow * kRow + kRow / 2;
        const y1 = y + kRow / 2;
        svg.appendChild(ZS.el('path', {
          d: 'M' + x0 + ',' + y0 + ' C' + (x0 + 30) + ',' + y0 + ' ' + (x1 + 30) + ',' + y1 + ' ' + x1 + ',' + y1,
          class: 'arrow', 'marker-end': 'url(#arrowhead)',
        }));
      }
    }
    svg.insertBefore(ZS.el('defs', {}, ZS.el('marker', {
      id: 'arrowhead', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto',
    }, ZS.el('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#1d2330' }))), svg.firstChild);
    const div = ZS.el('div', { class: 'bucket' }, [
      ZS.el('h4', {}, 'buffer ' + bk.buffer + ', bucket ' + bk.bucket + ': ' + span + ' elements'), svg]);
    root.appendChild(div);
  }
};
