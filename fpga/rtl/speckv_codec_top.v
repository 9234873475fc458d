// SPDX-License-Identifier: Apache-2.0
// Encoder and decoder side by side, independent streams: the unit the
// simulation harness drives (fpga/sim) and the top of the synthesis check.
`default_nettype none
module speckv_codec_top #(
  parameter integer DW = 512,
  parameter integer MAX_BYTES = 4096,
  parameter integer MODES = 18          // known record mode ids (= codec::kModeCount)
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
endmodule
`default_nettype wire
