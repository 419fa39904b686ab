"""Plain-text renderings of invoices and trial balances."""

from .money import Money


def format_invoice(invoice, installments=1):
    """The invoice as a fixed-width text block (lines, totals, payment plan)."""
    width = 64
    out = [f"Invoice {invoice.number}".ljust(width - 10) + invoice.issued.isoformat(), "-" * width]
    for line, net in zip(invoice.lines, invoice.discounted_nets()):
        label = f"{line.description} ({_qty(line.quantity)} x {line.unit_price.format()})"
        out.append(_row(label, line.net, width))
    out.append("-" * width)
    out.append(_row("Subtotal", invoice.subtotal, width))
    if invoice.discount:
        out.append(_row("Discount", -invoice.discount, width))
    for rate, amount in invoice.tax_by_rate().items():
        if rate:
            out.append(_row(f"Tax {_qty(rate * 100)}%", amount, width))
    out.append(_row("Total", invoice.total, width))
    if installments > 1:
        out.append("")
        for number, (due, amount) in enumerate(invoice.installments(installments), start=1):
            out.append(_row(f"Installment {number} due {due.isoformat()}", amount, width))
    return "\n".join(out)


def format_trial_balance(ledger, currency, as_of=None):
    rows = ledger.trial_balance(currency, as_of)
    zero = Money.zero(currency)
    debit_total = sum((d for _, d, _ in rows), zero)
    credit_total = sum((c for _, _, c in rows), zero)
    out = [f"{'Account':<32}{'Debit':>16}{'Credit':>16}"]
    for account, debit, credit in rows:
        out.append(f"{str(account):<32}{_cell(debit):>16}{_cell(credit):>16}")
    out.append(f"{'Total':<32}{_cell(debit_total):>16}{_cell(credit_total):>16}")
    return "\n".join(out)


def _row(label, amount, width):
    text = amount.format()
    return label[: width - len(text) - 1].ljust(width - len(text)) + text


def _cell(amount):
    return amount.format() if amount else ""


def _qty(quantity):
    return f"{quantity.normalize():f}"
