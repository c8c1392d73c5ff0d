/** Confirmation of actions (a modal dialog: focus stays inside, Escape cancels) and status messages. */
import { ApiError } from "./api.js";
import { h } from "./dom.js";

/** Asks the operator to confirm `message`; resolves true only on the confirm button. */
export function confirmAction(message: string, confirmLabel: string): Promise<boolean> {
  const dialog = h("dialog", { class: "confirm", "aria-label": "Confirm" });
  // The live refresh may have replaced the button that opened the dialog: focus goes back to its
  // successor (same data-key), not to the page's start.
  const opener =
    document.activeElement instanceof HTMLElement ? document.activeElement.dataset.key : undefined;
  return new Promise((resolve) => {
    const close = (ok: boolean) => {
      dialog.close();
      dialog.remove();
      if (opener) document.querySelector<HTMLElement>(`[data-key="${CSS.escape(opener)}"]`)?.focus();
      resolve(ok);
    };
    dialog.append(
      h("p", {}, message),
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", class: "secondary", onclick: () => close(false) }, "Cancel"),
        h(
          "button",
          { type: "button", class: "danger", "data-confirm": true, onclick: () => close(true) },
          confirmLabel,
        ),
      ),
    );
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      close(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector<HTMLButtonElement>("[data-confirm]")?.focus();
  });
}

/** Shows a short message in the page's live region (read out by screen readers). */
export function notify(message: string, kind: "ok" | "error" = "ok"): void {
  const region = document.getElementById("status");
  if (!region) return;
  region.className = `status ${kind}`;
  region.textContent = message;
}

/**
 * Runs a confirmed action: asks, calls `run`, reports its answer (or error) and calls `done` on
 * success. Buttons stay usable: a failed action can be tried again.
 */
export async function act(
  question: string,
  confirmLabel: string,
  run: () => Promise<string>,
  done?: () => void,
): Promise<void> {
  if (!(await confirmAction(question, confirmLabel))) return;
  try {
    notify(await run());
    done?.();
  } catch (error) {
    notify(
      error instanceof ApiError ? `Refused (${error.status}): ${error.message}` : String(error),
      "error",
    );
  }
}
