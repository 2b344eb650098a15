// The shop's Grab before the page's WASM has arrived (`sale::early`): on a phone on a
// slow link that takes a second or more, and a shopper who arrives as a sale opens
// would wait that long for a button that works. So this script, inline in the page,
// sends a Grab press at once through the JSON API (the place in the line is taken at
// the press) and enables a button at its sale's opening instant, by the gate's clock
// the page was rendered with. The shop's island takes over as it hydrates: it sets
// `seckillLive`, after which this script does nothing, and shows what each early
// press got (`seckillEarly`, the answers by voucher id).
(() => {
  const script = document.currentScript;
  // The gate's time (ms) when the page was rendered, and this clock's reading when it
  // arrived: "now" by them is never ahead of the gate's.
  const gate = Number(script.dataset.gate);
  const since = performance.now();
  window.seckillSince = since;
  const now = () => gate + performance.now() - since;
  const early = (window.seckillEarly = {});
  const call = async (name, args) => {
    const r = await fetch('/api/' + name, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(args),
    });
    return { ok: r.ok, body: await r.text() };
  };
  const grab = async (id, fair) => {
    let token = null;
    if (fair) {
      const issued = await call('grab_token', { voucher_id: id });
      if (!issued.ok) return issued;
      token = JSON.parse(issued.body).token;
    }
    return call('grab', { voucher_id: id, token });
  };
  document.addEventListener('click', (e) => {
    const button = e.target instanceof Element && e.target.closest('button[data-grab]');
    if (!button || window.seckillLive || button.disabled) return;
    const id = button.dataset.grab;
    button.disabled = true;
    // A failure to send is the island's to retry: it reads `null`.
    early[id] = grab(Number(id), 'fair' in button.dataset).catch(() => null);
  });
  const opening = setInterval(() => {
    if (window.seckillLive || !Number.isFinite(gate)) return clearInterval(opening);
    for (const button of document.querySelectorAll('button[data-opens][disabled]')) {
      if (Number(button.dataset.opens) <= now() && !early[button.dataset.grab]) button.disabled = false;
    }
  }, 100);
})();
