// Rootproof chat: Enter submits, Shift+Enter makes a new line, focus follows new answers.
(function () {
  "use strict";

  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("textarea[data-submit-on-enter]")) return;
    // isComposing: Enter that confirms an IME candidate (Chinese input) must not send.
    if (event.key !== "Enter" || event.shiftKey || event.isComposing || event.keyCode === 229) return;
    event.preventDefault();
    if (box.value.trim() === "") return;
    var form = box.form;
    if (form.requestSubmit) form.requestSubmit(); else form.submit();
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var form = event.detail.elt;
    if (form.id !== "ask" || !event.detail.successful) return;
    if (event.detail.target && event.detail.target.id === "turns") {
      form.reset();
      var error = document.getElementById("ask-error");
      if (error) error.textContent = "";
    }
  });

  // A new answer (swapped in by polling or a retry) takes the focus, so keyboard and
  // screen-reader users land on it.
  document.addEventListener("htmx:load", function (event) {
    var elt = event.detail.elt;
    if (!elt || elt === document.body || !elt.matches) return;
    var answer = elt.matches(".answer") ? elt : elt.querySelector(".answer");
    if (answer && !answer.closest(".turn-body.seen")) {
      answer.closest(".turn-body") && answer.closest(".turn-body").classList.add("seen");
      answer.focus({ preventScroll: false });
    }
  });
})();
