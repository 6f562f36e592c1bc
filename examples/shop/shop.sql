-- An online shop: customers, products, orders and their items (the routegate desk example).
CREATE TABLE customers (
    id integer PRIMARY KEY,
    name text NOT NULL,
    email text NOT NULL,
    country text NOT NULL,
    city text NOT NULL,
    password_hash text NOT NULL
);

CREATE TABLE products (
    id integer PRIMARY KEY,
    name text NOT NULL,
    category text NOT NULL,
    price numeric(10, 2) NOT NULL,
    stock integer NOT NULL
);

CREATE TABLE orders (
    id integer PRIMARY KEY,
    customer_id integer NOT NULL REFERENCES customers (id),
    status text NOT NULL,
    ordered_on date NOT NULL,
    total numeric(10, 2) NOT NULL,
    tracking_number text
);

CREATE TABLE order_items (
    id integer PRIMARY KEY,
    order_id integer NOT NULL REFERENCES orders (id),
    product_id integer NOT NULL REFERENCES products (id),
    quantity integer NOT NULL
);

INSERT INTO customers (id, name, email, country, city, password_hash) VALUES
    (1, 'Maria Garcia', 'maria@example.com', 'Spain', 'Madrid', 'x1$9f8e'),
    (2, 'Liam Murphy', 'liam@example.com', 'Ireland', 'Dublin', 'x1$77aa'),
    (3, 'Yuki Tanaka', 'yuki@example.com', 'Japan', 'Osaka', 'x1$0b3c'),
    (4, 'Amara Okafor', 'amara@example.com', 'Nigeria', 'Lagos', 'x1$5d21'),
    (5, 'Lukas Becker', 'lukas@example.com', 'Germany', 'Hamburg', 'x1$e4f0'),
    (6, 'Sofia Rossi', 'sofia@example.com', 'Italy', 'Turin', 'x1$aa19'),
    (7, 'Noah Wilson', 'noah@example.com', 'Canada', 'Toronto', 'x1$c0de'),
    (8, 'Priya Sharma', 'priya@example.com', 'India', 'Pune', 'x1$1234');

INSERT INTO products (id, name, category, price, stock) VALUES
    (101, 'Trail Backpack', 'bags', 89.00, 14),
    (102, 'Rain Jacket', 'clothing', 129.50, 0),
    (103, 'Camping Stove', 'outdoor', 54.99, 31),
    (104, 'Wool Socks', 'clothing', 12.00, 120),
    (105, 'Headlamp', 'outdoor', 24.90, 58),
    (106, 'Water Filter', 'outdoor', 39.00, 7),
    (107, 'Travel Pillow', 'accessories', 19.50, 44),
    (108, 'Hiking Boots', 'footwear', 149.00, 9);

INSERT INTO orders (id, customer_id, status, ordered_on, total, tracking_number) VALUES
    (1040, 1, 'delivered', '2026-09-02', 101.00, 'TRK-5501'),
    (1041, 2, 'shipped', '2026-10-11', 129.50, 'TRK-5502'),
    (1042, 1, 'open', '2026-11-20', 79.89, NULL),
    (1043, 3, 'delivered', '2026-08-15', 149.00, 'TRK-5503'),
    (1044, 4, 'returned', '2026-09-30', 54.99, 'TRK-5504'),
    (1045, 5, 'open', '2026-11-22', 36.00, NULL),
    (1046, 6, 'shipped', '2026-11-05', 63.90, 'TRK-5505'),
    (1047, 7, 'cancelled', '2026-10-01', 19.50, NULL),
    (1048, 2, 'open', '2026-11-23', 24.90, NULL),
    (1049, 8, 'delivered', '2026-07-19', 238.00, 'TRK-5506');

INSERT INTO order_items (id, order_id, product_id, quantity) VALUES
    (1, 1040, 101, 1), (2, 1040, 104, 1), (3, 1041, 102, 1), (4, 1042, 103, 1), (5, 1042, 105, 1),
    (6, 1043, 108, 1), (7, 1044, 103, 1), (8, 1045, 104, 3), (9, 1046, 106, 1), (10, 1046, 105, 1),
    (11, 1047, 107, 1), (12, 1048, 105, 1), (13, 1049, 108, 1), (14, 1049, 101, 1);
