// pslurm's dashboard: the one script. It keeps a job's output tail live (every 3 s while the job
// runs); everything else is plain HTML from the controller.
"use strict";
(function () {
  const tail = document.getElementById("tail");
  if (!tail) return;
  async function refresh() {
    let next = true;
    try {
      const reply = await fetch(tail.dataset.src, {credentials: "same-origin", cache: "no-store"});
      const body = await reply.json();
      if (!reply.ok) {
        tail.textContent = body.error || ("HTTP " + reply.status);
        tail.dataset.state = "refused";
        next = false;
      } else {
        const atEnd = tail.scrollTop + tail.clientHeight >= tail.scrollHeight - 4;
        tail.textContent = (body.truncated ? "...\n" : "") + body.data + (body.error ? "\n[" + body.error + "]" : "");
        tail.dataset.state = body.running ? "live" : "ended";
        if (atEnd) tail.scrollTop = tail.scrollHeight;
        next = body.running;
      }
    } catch (err) {
      tail.dataset.state = "error";
    }
    if (next) setTimeout(refresh, 3000);
  }
  refresh();
})();
