// Trace timeline: the row whose span is shown in the side panel stays highlighted.
document.addEventListener("click", (event) => {
  const row = event.target.closest(".tl-row");
  if (!row) return;
  document.querySelectorAll(".tl-row.selected").forEach((other) => other.classList.remove("selected"));
  row.classList.add("selected");
});
