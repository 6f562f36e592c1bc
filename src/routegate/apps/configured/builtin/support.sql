-- The built-in support desk's data: three customers and their tickets.
CREATE TABLE customers (
    id integer PRIMARY KEY,
    name text NOT NULL,
    city text NOT NULL
);

CREATE TABLE tickets (
    id integer PRIMARY KEY,
    customer_id integer NOT NULL REFERENCES customers (id),
    issue text NOT NULL,
    status text NOT NULL
);

INSERT INTO customers (id, name, city) VALUES
    (1, 'John Doe', 'New York'),
    (2, 'Jane Smith', 'London'),
    (3, 'Alex Brown', 'Toronto');

INSERT INTO tickets (id, customer_id, issue, status) VALUES
    (1, 1, 'Login not working', 'open'),
    (2, 1, 'Password reset issue', 'closed'),
    (3, 2, 'Billing question', 'open');
