subtotal = 1
total = subtotal + 1
print(total)
