// SPDX-License-Identifier: Apache-2.0
// Encoder and decoder side by side, independent streams: the unit the
// simulation harness drives (fpga/sim) and the top of the synthesis check.
// PACKED = 1 adds the engines of the fixed-width packed presets (§19,
// speckv_penc / speckv_pdec) beside speckv_enc / speckv_dec: a page whose
// cfg_mode is 33..38 goes to speckv_penc, a record whose flags byte says
// entropy 4 (bits 2-4 = 4) to speckv_pdec; a FIFO of engine ids in arrival
// order hands the outputs back in order. PACKED = 0 is the RTL without them
// (the CI synthesis check).
`default_nettype none
module speckv_codec_top #(
  parameter integer DW = 512,
  parameter integer MAX_BYTES = 4096,
  parameter integer MODES = 18,         // known record mode ids (= codec::kModeCount)
  parameter integer PACKED = 1          // 1: with the §19 packed engines
) (
  input  wire                       clk,
  input  wire                       rst,
  // encoder: page in, record out
  input  wire                       enc_in_valid,
  output wire                       enc_in_ready,
  input  wire [DW-1:0]              enc_in_data,
  input  wire [$clog2(DW/8+1)-1:0]  enc_in_nbytes,
  input  wire                       enc_in_last,
  input  wire [7:0]                 enc_cfg_mode,
  input  wire [7:0]                 enc_cfg_dtype,
  input  wire [15:0]                enc_cfg_channels,
  output wire                       enc_out_valid,
  input  wire                       enc_out_ready,
  output wire [DW-1:0]              enc_out_data,
  output wire [$clog2(DW/8+1)-1:0]  enc_out_nbytes,
  output wire                       enc_out_last,
  // decoder: record in, page out, status
  input  wire                       dec_in_valid,
  output wire                       dec_in_ready,
  input  wire [DW-1:0]              dec_in_data,
  input  wire [$clog2(DW/8+1)-1:0]  dec_in_nbytes,
  input  wire                       dec_in_last,
  output wire                       dec_out_valid,
  input  wire                       dec_out_ready,
  output wire [DW-1:0]              dec_out_data,
  output wire [$clog2(DW/8+1)-1:0]  dec_out_nbytes,
  output wire                       dec_out_last,
  output wire                       dec_st_valid,
  input  wire                       dec_st_ready,
  output wire [3:0]                 dec_st_code
);
  localparam integer NBW = $clog2(DW/8+1);
  generate if (PACKED == 0) begin : g_plain
  speckv_enc #(.DW(DW), .MAX_BYTES(MAX_BYTES)) u_enc (
    .clk(clk), .rst(rst),
    .in_valid(enc_in_valid), .in_ready(enc_in_ready), .in_data(enc_in_data),
    .in_nbytes(enc_in_nbytes), .in_last(enc_in_last),
    .cfg_mode(enc_cfg_mode), .cfg_dtype(enc_cfg_dtype), .cfg_channels(enc_cfg_channels),
    .out_valid(enc_out_valid), .out_ready(enc_out_ready), .out_data(enc_out_data),
    .out_nbytes(enc_out_nbytes), .out_last(enc_out_last));

  speckv_dec #(.DW(DW), .MODES(MODES), .MAX_BYTES(MAX_BYTES)) u_dec (
    .clk(clk), .rst(rst),
    .in_valid(dec_in_valid), .in_ready(dec_in_ready), .in_data(dec_in_data),
    .in_nbytes(dec_in_nbytes), .in_last(dec_in_last),
    .out_valid(dec_out_valid), .out_ready(dec_out_ready), .out_data(dec_out_data),
    .out_nbytes(dec_out_nbytes), .out_last(dec_out_last),
    .st_valid(dec_st_valid), .st_ready(dec_st_ready), .st_code(dec_st_code));
  end else begin : g_packed
  // ---------------------------------------------------------------- encoder side
  localparam integer QD = 8;                      // pages / records in flight, per side
  wire e_first_p = enc_cfg_mode >= 8'd33 && enc_cfg_mode <= 8'd38;
  reg  e_inpage, e_sel;                           // inside a page, and its engine (1 packed)
  wire e_cur = e_inpage ? e_sel : e_first_p;
  reg  [QD-1:0] eq;                               // engine ids in page order
  reg  [3:0] eq_n;
  wire e_full = eq_n == QD;
  wire e_gate = e_inpage || !e_full;
  wire oe_in_ready, pe_in_ready;
  wire oe_out_valid, pe_out_valid, oe_out_last, pe_out_last;
  wire [DW-1:0] oe_out_data, pe_out_data;
  wire [NBW-1:0] oe_out_nbytes, pe_out_nbytes;
  wire e_head = eq[0];
  wire e_any = eq_n != 4'd0;
  assign enc_in_ready = e_gate && (e_cur ? pe_in_ready : oe_in_ready);
  assign enc_out_valid = e_any && (e_head ? pe_out_valid : oe_out_valid);
  assign enc_out_data = e_head ? pe_out_data : oe_out_data;
  assign enc_out_nbytes = e_head ? pe_out_nbytes : oe_out_nbytes;
  assign enc_out_last = e_head ? pe_out_last : oe_out_last;
  wire e_push = enc_in_valid && enc_in_ready && !e_inpage;
  wire e_pop = enc_out_valid && enc_out_ready && enc_out_last;
  always @(posedge clk) begin
    if (rst) begin
      e_inpage <= 1'b0;
      e_sel <= 1'b0;
      eq <= {QD{1'b0}};
      eq_n <= 4'd0;
    end else begin
      if (enc_in_valid && enc_in_ready) begin
        e_inpage <= !enc_in_last;
        if (!e_inpage) e_sel <= e_first_p;
      end
      if (e_push && e_pop) begin
        eq <= (eq >> 1) | ({{(QD-1){1'b0}}, e_first_p} << (eq_n - 4'd1));
      end else if (e_push) begin
        eq <= eq | ({{(QD-1){1'b0}}, e_first_p} << eq_n);
        eq_n <= eq_n + 4'd1;
      end else if (e_pop) begin
        eq <= eq >> 1;
        eq_n <= eq_n - 4'd1;
      end
    end
  end
  speckv_enc #(.DW(DW), .MAX_BYTES(MAX_BYTES)) u_enc (
    .clk(clk), .rst(rst),
    .in_valid(enc_in_valid && e_gate && !e_cur), .in_ready(oe_in_ready), .in_data(enc_in_data),
    .in_nbytes(enc_in_nbytes), .in_last(enc_in_last),
    .cfg_mode(enc_cfg_mode), .cfg_dtype(enc_cfg_dtype), .cfg_channels(enc_cfg_channels),
    .out_valid(oe_out_valid), .out_ready(enc_out_ready && e_any && !e_head), .out_data(oe_out_data),
    .out_nbytes(oe_out_nbytes), .out_last(oe_out_last));
  speckv_penc #(.DW(DW), .MAX_BYTES(MAX_BYTES)) u_penc (
    .clk(clk), .rst(rst),
    .in_valid(enc_in_valid && e_gate && e_cur), .in_ready(pe_in_ready), .in_data(enc_in_data),
    .in_nbytes(enc_in_nbytes), .in_last(enc_in_last),
    .cfg_mode(enc_cfg_mode), .cfg_dtype(enc_cfg_dtype), .cfg_channels(enc_cfg_channels),
    .out_valid(pe_out_valid), .out_ready(enc_out_ready && e_any && e_head), .out_data(pe_out_data),
    .out_nbytes(pe_out_nbytes), .out_last(pe_out_last));

  // ---------------------------------------------------------------- decoder side
  wire d_first_p = dec_in_nbytes >= 8 && dec_in_data[60:58] == 3'd4;   // byte 7, bits 2-4
  reg  d_inrec, d_sel;
  wire d_cur = d_inrec ? d_sel : d_first_p;
  reg  [QD-1:0] dq;
  reg  [3:0] dq_n;
  wire d_full = dq_n == QD;
  wire d_gate = d_inrec || !d_full;
  wire od_in_ready, pd_in_ready;
  wire od_out_valid, pd_out_valid, od_out_last, pd_out_last, od_st_valid, pd_st_valid;
  wire [DW-1:0] od_out_data, pd_out_data;
  wire [NBW-1:0] od_out_nbytes, pd_out_nbytes;
  wire [3:0] od_st_code, pd_st_code;
  wire d_head = dq[0];
  wire d_any = dq_n != 4'd0;
  assign dec_in_ready = d_gate && (d_cur ? pd_in_ready : od_in_ready);
  assign dec_out_valid = d_any && (d_head ? pd_out_valid : od_out_valid);
  assign dec_out_data = d_head ? pd_out_data : od_out_data;
  assign dec_out_nbytes = d_head ? pd_out_nbytes : od_out_nbytes;
  assign dec_out_last = d_head ? pd_out_last : od_out_last;
  assign dec_st_valid = d_any && (d_head ? pd_st_valid : od_st_valid);
  assign dec_st_code = d_head ? pd_st_code : od_st_code;
  wire d_push = dec_in_valid && dec_in_ready && !d_inrec;
  wire d_pop = dec_st_valid && dec_st_ready;
  always @(posedge clk) begin
    if (rst) begin
      d_inrec <= 1'b0;
      d_sel <= 1'b0;
      dq <= {QD{1'b0}};
      dq_n <= 4'd0;
    end else begin
      if (dec_in_valid && dec_in_ready) begin
        d_inrec <= !dec_in_last;
        if (!d_inrec) d_sel <= d_first_p;
      end
      if (d_push && d_pop) begin
        dq <= (dq >> 1) | ({{(QD-1){1'b0}}, d_first_p} << (dq_n - 4'd1));
      end else if (d_push) begin
        dq <= dq | ({{(QD-1){1'b0}}, d_first_p} << dq_n);
        dq_n <= dq_n + 4'd1;
      end else if (d_pop) begin
        dq <= dq >> 1;
        dq_n <= dq_n - 4'd1;
      end
    end
  end
  speckv_dec #(.DW(DW), .MODES(MODES), .MAX_BYTES(MAX_BYTES)) u_dec (
    .clk(clk), .rst(rst),
    .in_valid(dec_in_valid && d_gate && !d_cur), .in_ready(od_in_ready), .in_data(dec_in_data),
    .in_nbytes(dec_in_nbytes), .in_last(dec_in_last),
    .out_valid(od_out_valid), .out_ready(dec_out_ready && d_any && !d_head), .out_data(od_out_data),
    .out_nbytes(od_out_nbytes), .out_last(od_out_last),
    .st_valid(od_st_valid), .st_ready(dec_st_ready && d_any && !d_head), .st_code(od_st_code));
  speckv_pdec #(.DW(DW), .MODES(MODES), .MAX_BYTES(MAX_BYTES)) u_pdec (
    .clk(clk), .rst(rst),
    .in_valid(dec_in_valid && d_gate && d_cur), .in_ready(pd_in_ready), .in_data(dec_in_data),
    .in_nbytes(dec_in_nbytes), .in_last(dec_in_last),
    .out_valid(pd_out_valid), .out_ready(dec_out_ready && d_any && d_head), .out_data(pd_out_data),
    .out_nbytes(pd_out_nbytes), .out_last(pd_out_last),
    .st_valid(pd_st_valid), .st_ready(dec_st_ready && d_any && d_head), .st_code(pd_st_code));
  end endgenerate
endmodule
`default_nettype wire
