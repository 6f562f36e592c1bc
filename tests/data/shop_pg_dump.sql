--
-- PostgreSQL database dump
--

-- Dumped from database version 16.2
-- Dumped by pg_dump version 16.2

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: audit_order(); Type: FUNCTION; Schema: public; Owner: shop_owner
--

CREATE FUNCTION public.audit_order() RETURNS trigger
    LANGUAGE plpgsql
    AS $_$
BEGIN
    -- a body naming public tables, one of them made here: public.order_audit (id int); is text, not a table
    CREATE TABLE IF NOT EXISTS public.order_audit (order_id integer, seen timestamptz DEFAULT now());
    INSERT INTO public.order_audit (order_id) VALUES (NEW.id);
    IF NOT EXISTS (SELECT 1 FROM public.customers c WHERE c.id = NEW.customer_id) THEN
        RAISE EXCEPTION 'no customer % in public.customers; $$ is not the end', NEW.customer_id;
    END IF;
    RETURN NEW;
END;
$_$;


ALTER FUNCTION public.audit_order() OWNER TO shop_owner;

--
-- Name: open_order_total(integer); Type: FUNCTION; Schema: public; Owner: shop_owner
--

CREATE FUNCTION public.open_order_total(p_customer integer) RETURNS numeric
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(sum(o.total), 0) FROM public.orders o WHERE o.customer_id = p_customer AND o.status = 'open';
$$;


ALTER FUNCTION public.open_order_total(p_customer integer) OWNER TO shop_owner;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: customers; Type: TABLE; Schema: public; Owner: shop_owner
--

CREATE TABLE public.customers (
    id integer NOT NULL,
    name text NOT NULL,
    email text NOT NULL,
    country text NOT NULL,
    city text NOT NULL,
    password_hash text NOT NULL
);


ALTER TABLE public.customers OWNER TO shop_owner;

--
-- Name: orders; Type: TABLE; Schema: public; Owner: shop_owner
--

CREATE TABLE public.orders (
    id integer NOT NULL,
    customer_id integer NOT NULL,
    status text NOT NULL,
    ordered_on date NOT NULL,
    total numeric(10,2) NOT NULL,
    tracking_number text
);


ALTER TABLE public.orders OWNER TO shop_owner;

--
-- Name: TABLE orders; Type: COMMENT; Schema: public; Owner: shop_owner
--

COMMENT ON TABLE public.orders IS 'One row per checkout; status moves open -> shipped -> delivered (or returned, cancelled).';


--
-- Name: open_orders; Type: VIEW; Schema: public; Owner: shop_owner
--

CREATE VIEW public.open_orders AS
 SELECT o.id,
    c.name,
    o.total
   FROM (public.orders o
     JOIN public.customers c ON ((c.id = o.customer_id)))
  WHERE (o.status = 'open'::text);


ALTER VIEW public.open_orders OWNER TO shop_owner;

--
-- Name: order_items; Type: TABLE; Schema: public; Owner: shop_owner
--

CREATE TABLE public.order_items (
    id integer NOT NULL,
    order_id integer NOT NULL,
    product_id integer NOT NULL,
    quantity integer NOT NULL
);


ALTER TABLE public.order_items OWNER TO shop_owner;

--
-- Name: orders_id_seq; Type: SEQUENCE; Schema: public; Owner: shop_owner
--

CREATE SEQUENCE public.orders_id_seq
    START WITH 1050
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


ALTER SEQUENCE public.orders_id_seq OWNER TO shop_owner;

--
-- Name: orders_id_seq; Type: SEQUENCE OWNED BY; Schema: public; Owner: shop_owner
--

ALTER SEQUENCE public.orders_id_seq OWNED BY public.orders.id;


--
-- Name: products; Type: TABLE; Schema: public; Owner: shop_owner
--

CREATE TABLE public.products (
    id integer NOT NULL,
    name text NOT NULL,
    category text NOT NULL,
    price numeric(10,2) NOT NULL,
    stock integer NOT NULL
);


ALTER TABLE public.products OWNER TO shop_owner;

--
-- Name: orders id; Type: DEFAULT; Schema: public; Owner: shop_owner
--

ALTER TABLE ONLY public.orders ALTER COLUMN id SET DEFAULT nextval('public.orders_id_seq'::regclass);


--
-- Data for Name: customers; Type: TABLE DATA; Schema: public; Owner: shop_owner
--

COPY public.customers (id, name, email, country, city, password_hash) FROM stdin;
1	Maria Garcia	maria@example.com	Spain	Madrid	x1$9f8e
2	Liam Murphy	liam@example.com	Ireland	Dublin	x1$77aa
3	Yuki Tanaka	yuki@example.com	Japan	Osaka	x1$0b3c
4	Amara Okafor	amara@example.com	Nigeria	Lagos	x1$5d21
5	Lukas Becker	lukas@example.com	Germany	Hamburg	x1$e4f0
6	Sofia Rossi	sofia@example.com	Italy	Turin	x1$aa19
7	Noah Wilson	noah@example.com	Canada	Toronto	x1$c0de
8	Priya Sharma	priya@example.com	India	Pune	x1$1234
\.


--
-- Data for Name: order_items; Type: TABLE DATA; Schema: public; Owner: shop_owner
--

COPY public.order_items (id, order_id, product_id, quantity) FROM stdin;
1	1040	101	1
2	1040	104	1
3	1041	102	1
4	1042	103	1
5	1042	105	1
6	1043	108	1
7	1044	103	1
8	1045	104	3
9	1046	106	1
10	1046	105	1
11	1047	107	1
12	1048	105	1
13	1049	108	1
14	1049	101	1
\.


--
-- Data for Name: orders; Type: TABLE DATA; Schema: public; Owner: shop_owner
--

COPY public.orders (id, customer_id, status, ordered_on, total, tracking_number) FROM stdin;
1040	1	delivered	2026-09-02	101.00	TRK-5501
1041	2	shipped	2026-10-11	129.50	TRK-5502
1042	1	open	2026-11-20	79.89	\N
1043	3	delivered	2026-08-15	149.00	TRK-5503
1044	4	returned	2026-09-30	54.99	TRK-5504
1045	5	open	2026-11-22	36.00	\N
1046	6	shipped	2026-11-05	63.90	TRK-5505
1047	7	cancelled	2026-10-01	19.50	\N
1048	2	open	2026-11-23	24.90	\N
1049	8	delivered	2026-07-19	238.00	TRK-5506
\.


--
-- Data for Name: products; Type: TABLE DATA; Schema: public; Owner: shop_owner
--

COPY public.products (id, name, category, price, stock) FROM stdin;
101	Trail Backpack	bags	89.00	14
102	Rain Jacket	clothing	129.50	0
103	Camping Stove	outdoor	54.99	31
104	Wool Socks	clothing	12.00	120
105	Headlamp	outdoor	24.90	58
106	Water Filter	outdoor	39.00	7
107	Travel Pillow	accessories	19.50	44
108	Hiking Boots	footwear	149.00	9
\.


--
-- Name: orders_id_seq; Type: SEQUENCE SET; Schema: public; Owner: shop_owner
--

SELECT pg_catalog.setval('public.orders_id_seq', 1050, false);


--
-- Name: customers customers_pkey; Type: CONSTRAINT; Schema: public; Owner: shop_owner
--

ALTER TABLE ONLY public.customers
    ADD CONSTRAINT customers_pkey PRIMARY KEY (id);


--
-- Name: order_items order_items_pkey; Type: CONSTRAINT; Schema: public; Owner: shop_owner
--

ALTER TABLE ONLY public.order_items
    ADD CONSTRAINT order_items_pkey PRIMARY KEY (id);


--
-- Name: orders orders_pkey; Type: CONSTRAINT; Schema: public; Owner: shop_owner
--

ALTER TABLE ONLY public.orders
    ADD CONSTRAINT orders_pkey PRIMARY KEY (id);


--
-- Name: products products_pkey; Type: CONSTRAINT; Schema: public; Owner: shop_owner
--

ALTER TABLE ONLY public.products
    ADD CONSTRAINT products_pkey PRIMARY KEY (id);


--
-- Name: orders_customer_id_idx; Type: INDEX; Schema: public; Owner: shop_owner
--

CREATE INDEX orders_customer_id_idx ON public.orders USING btree (customer_id);


--
-- Name: orders orders_audit; Type: TRIGGER; Schema: public; Owner: shop_owner
--

CREATE TRIGGER orders_audit AFTER INSERT ON public.orders FOR EACH ROW EXECUTE FUNCTION public.audit_order();


--
-- Name: order_items order_items_order_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: shop_owner
--

ALTER TABLE ONLY public.order_items
    ADD CONSTRAINT order_items_order_id_fkey FOREIGN KEY (order_id) REFERENCES public.orders(id);


--
-- Name: order_items order_items_product_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: shop_owner
--

ALTER TABLE ONLY public.order_items
    ADD CONSTRAINT order_items_product_id_fkey FOREIGN KEY (product_id) REFERENCES public.products(id);


--
-- Name: orders orders_customer_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: shop_owner
--

ALTER TABLE ONLY public.orders
    ADD CONSTRAINT orders_customer_id_fkey FOREIGN KEY (customer_id) REFERENCES public.customers(id);


--
-- Name: TABLE customers; Type: ACL; Schema: public; Owner: shop_owner
--

GRANT SELECT ON TABLE public.customers TO shop_analyst;


--
-- Name: TABLE orders; Type: ACL; Schema: public; Owner: shop_owner
--

GRANT SELECT ON TABLE public.orders TO shop_analyst;


--
-- Name: TABLE order_items; Type: ACL; Schema: public; Owner: shop_owner
--

GRANT SELECT ON TABLE public.order_items TO shop_analyst;


--
-- Name: TABLE products; Type: ACL; Schema: public; Owner: shop_owner
--

GRANT SELECT ON TABLE public.products TO shop_analyst;


--
-- PostgreSQL database dump complete
--

